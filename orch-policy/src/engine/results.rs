//! The ExtMcp answers: a decision as the request or response phase's result.

use super::admission::Admitted;
use super::prelude::*;
use super::state::TOKEN_FIELD;

pub(super) fn request_result(decided: Result<Admitted, CheckError>) -> McpRequestResult {
    use mcp_request_result::Result as R;
    let (result, metadata) = match decided {
        Ok(Admitted::Pass) => (R::Pass(Pass {}), None),
        Ok(Admitted::Call { token, mutated }) => {
            let mut fields = std::collections::BTreeMap::new();
            fields.insert(
                TOKEN_FIELD.to_owned(),
                prost_types::Value {
                    kind: Some(Kind::StringValue(format!("{token:016x}"))),
                },
            );
            let result = match mutated {
                Some(bytes) => R::Mutated(bytes),
                None => R::Pass(Pass {}),
            };
            (result, Some(prost_types::Struct { fields }))
        }
        Err(error) => (R::Error(error.into_error()), None),
    };
    McpRequestResult {
        result: Some(result),
        header_mutation: None,
        metadata,
    }
}

pub(super) fn response_result(decided: Result<Option<Vec<u8>>, CheckError>) -> McpResponseResult {
    use mcp_response_result::Result as R;
    let result = match decided {
        Ok(None) => R::Pass(Pass {}),
        Ok(Some(bytes)) => R::Mutated(bytes),
        Err(error) => R::Error(error.into_error()),
    };
    McpResponseResult {
        result: Some(result),
    }
}
