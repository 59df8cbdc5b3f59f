//! Reading a call from the bytes the gateway sends: its tool, its arguments exactly as
//! written, orch's own approval answer, and the call token fed back.

use super::prelude::*;
use super::state::TOKEN_FIELD;

/// A `tools/call`'s params, read.
pub(super) struct Call {
    pub(super) tool: String,
    /// The arguments' text as the call carries it (`{}` when it has none).
    pub(super) arguments: String,
    /// The call's identity, over the arguments as written (numbers exactly).
    pub(super) digest: CallDigest,
    /// The params without orch's own approval answer, when they carried one (what goes
    /// upstream instead: every other byte of every value as sent).
    pub(super) stripped: Option<Vec<u8>>,
    /// The human's answer the retry carries, with the ticket of its question.
    pub(super) answer: Option<(Ticket, Answer)>,
}

/// Reads a `tools/call`'s params: an object with a string `name` and, if any, an object
/// of `arguments`, at most `max` bytes, no key written twice (the upstream might read
/// the other copy than orch judged).
pub(super) fn read_call(params: &[u8], max: usize) -> Result<Call, CheckError> {
    if params.len() > max {
        return Err(Invalid::ParamsTooLarge {
            len: params.len(),
            max,
        }
        .into());
    }
    let text = std::str::from_utf8(params).map_err(|e| Invalid::ParamsNotJson(e.to_string()))?;
    let value: Value =
        serde_json::from_str(text).map_err(|e| Invalid::ParamsNotJson(e.to_string()))?;
    if !value.is_object() {
        return Err(Invalid::ParamsNotObject.into());
    }
    let entries = object_entries(text)?;
    let get = |key: &str| entries.iter().find(|(k, _)| k == key).map(|(_, v)| &**v);
    let tool = match value.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        Some(Value::String(_)) => return Err(Invalid::NameEmpty.into()),
        Some(_) => return Err(Invalid::NameNotString.into()),
        None => return Err(Invalid::NoName.into()),
    };
    let arguments = match (value.get("arguments"), get("arguments")) {
        (None | Some(Value::Null), _) => "{}".to_owned(),
        (Some(Value::Object(_)), Some(raw)) => raw.get().to_owned(),
        _ => return Err(Invalid::ArgumentsNotObject.into()),
    };
    // The canonical form is taken once: it refuses a key written twice, and the digest
    // is over it (as `CallDigest::of_text` would take it again).
    let Some(canonical) = orch_runtime::approval::canonical_json(&arguments) else {
        return Err(Invalid::ArgumentsDuplicateKey.into());
    };
    let digest = CallDigest::of_canonical(&tool, canonical.as_bytes());
    let state = match value.get("requestState") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(Invalid::RequestStateNotString.into()),
    };
    let response = value.get("inputResponses").and_then(|r| r.get(INPUT_KEY));
    let answer = elicitation::answer_in_retry(state.as_deref(), response, &digest)
        .map_err(Invalid::Answer)?;
    let stripped = if elicitation::is_ours(state.as_deref()) {
        // The answer is orch's: the upstream gets the call as the model made it, every
        // other value exactly as sent.
        let mut out = String::with_capacity(text.len());
        out.push('{');
        for (key, raw) in &entries {
            let kept = match key.as_str() {
                "requestState" => None,
                "inputResponses" => without_orch_answer(raw)?,
                _ => Some(raw.get().to_owned()),
            };
            if let Some(kept) = kept {
                if out.len() > 1 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(key).unwrap_or_default());
                out.push(':');
                out.push_str(&kept);
            }
        }
        out.push('}');
        Some(out.into_bytes())
    } else {
        None
    };
    Ok(Call {
        tool,
        arguments,
        digest,
        stripped,
        answer,
    })
}

/// An object's entries as written (values untouched); a key written twice is INVALID.
pub(super) fn object_entries(text: &str) -> Result<Vec<(String, Box<RawValue>)>, CheckError> {
    let entries =
        protocol::object_entries(text).map_err(|e| Invalid::ParamsNotJson(e.to_string()))?;
    let mut keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
        return Err(Invalid::DuplicateKey(w[0].to_owned()).into());
    }
    Ok(entries)
}

/// `inputResponses` without orch's own answer: `None` when nothing else is left.
pub(super) fn without_orch_answer(raw: &RawValue) -> Result<Option<String>, CheckError> {
    let entries = object_entries(raw.get())?;
    let rest: Vec<String> = entries
        .iter()
        .filter(|(k, _)| k != INPUT_KEY)
        .map(|(k, v)| {
            format!(
                "{}:{}",
                serde_json::to_string(k).unwrap_or_default(),
                v.get()
            )
        })
        .collect();
    Ok((!rest.is_empty()).then(|| format!("{{{}}}", rest.join(","))))
}

/// The call token the gateway fed back in `metadata_context`, if any.
pub(super) fn call_token(context: Option<&prost_types::Struct>) -> Result<Option<u64>, CheckError> {
    let Some(value) = context
        .and_then(|c| c.fields.get(TOKEN_FIELD))
        .and_then(|v| v.kind.as_ref())
    else {
        return Ok(None);
    };
    match value {
        Kind::StringValue(s) if s.len() == 16 => u64::from_str_radix(s, 16)
            .map(Some)
            .map_err(|_| bad_token()),
        Kind::NullValue(_) => Ok(None),
        _ => Err(bad_token()),
    }
}

pub(super) fn bad_token() -> CheckError {
    Invalid::BadToken.into()
}
