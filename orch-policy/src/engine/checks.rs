//! The two checks the gateway makes: `CheckRequest` and `CheckResponse`.

use super::admission::Admitted;
use super::prelude::*;
use super::results::{request_result, response_result};
use super::state::Engine;

impl<S: SessionStore + 'static> Engine<S> {
    /// `CheckRequest`.
    pub(crate) async fn check_request(
        &self,
        request: McpRequest,
        parent: &crate::telemetry::Parent,
    ) -> McpRequestResult {
        let Ok(_permit) = self.permits.try_acquire() else {
            return request_result(Err(self.overloaded()));
        };
        if request.method != "tools/call" {
            return request_result(Ok(Admitted::Pass));
        }
        // The call is read once: its tool and run name the span, then it is judged.
        let (span, decided) = match self.read_request(&request) {
            Ok((run, call)) => {
                let span = crate::telemetry::check(parent, &call.tool, &run, self.options.mode);
                let decided = span.run(self.admit(&run, call)).await;
                (span, decided)
            }
            Err(error) => (
                crate::telemetry::check(parent, "", "", self.options.mode),
                Err(error),
            ),
        };
        span.decided(match &decided {
            Ok(_) => "admitted",
            Err(error) => error
                .data()
                .and_then(|d| d.get("refusal"))
                .and_then(|r| r.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or("failed"),
        });
        request_result(decided)
    }

    /// `CheckResponse`.
    pub(crate) async fn check_response(&self, response: McpResponse) -> McpResponseResult {
        let Ok(_permit) = self.permits.try_acquire() else {
            return response_result(Err(self.overloaded()));
        };
        let decided = match response.method.as_str() {
            "tools/call" => self.finish_call(&response).await.map(|()| None),
            "tools/list" => self.filter_list(&response).await,
            _ => Ok(None),
        };
        response_result(decided)
    }
}
