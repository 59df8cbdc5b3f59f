//! The generated ExtMcp types speak agentgateway's wire format: the field numbers and
//! enum values of its `ext_mcp.proto` (v1.4.1), checked on exact bytes, and messages
//! round-trip through their encoding.

use orch_policy::wire::{
    authorization_error::Code, mcp_request_result, AuthorizationError, HeaderMutation, McpHeader,
    McpRequest, McpRequestResult, McpResponse, Pass,
};
use prost::Message;

#[test]
fn field_numbers_are_agentgateways() {
    // McpRequest: service_names = 1, method = 2, metadata_context = 3, mcp_request = 4,
    // headers = 5 (tag = field << 3 | wire type 2).
    let request = McpRequest {
        service_names: vec!["a".into()],
        method: "m".into(),
        metadata_context: Some(prost_types::Struct::default()),
        mcp_request: Some(b"{}".to_vec()),
        headers: vec![McpHeader {
            key: "k".into(),
            value: b"v".to_vec(),
        }],
    };
    assert_eq!(
        request.encode_to_vec(),
        [
            0x0a, 1, b'a', // 1: service_names
            0x12, 1, b'm', // 2: method
            0x1a, 0, // 3: metadata_context (empty Struct)
            0x22, 2, b'{', b'}', // 4: mcp_request
            0x2a, 6, 0x0a, 1, b'k', 0x12, 1, b'v', // 5: headers {1: key, 2: value}
        ]
    );
    // McpResponse: mcp_response = 4.
    let response = McpResponse {
        mcp_response: b"1".to_vec(),
        ..McpResponse::default()
    };
    assert_eq!(response.encode_to_vec(), [0x22, 1, b'1']);
    // McpRequestResult: pass = 1, mutated = 2, error = 3, header_mutation = 4, metadata = 5.
    let pass = McpRequestResult {
        result: Some(mcp_request_result::Result::Pass(Pass {})),
        header_mutation: Some(HeaderMutation {
            set: vec![],
            remove: vec!["x".into()],
        }),
        metadata: Some(prost_types::Struct::default()),
    };
    assert_eq!(
        pass.encode_to_vec(),
        [0x0a, 0, 0x22, 3, 0x12, 1, b'x', 0x2a, 0]
    );
    let mutated = McpRequestResult {
        result: Some(mcp_request_result::Result::Mutated(b"{}".to_vec())),
        ..McpRequestResult::default()
    };
    assert_eq!(mutated.encode_to_vec(), [0x12, 2, b'{', b'}']);
    // AuthorizationError: code = 1 (PERMISSION_DENIED = 1, RESOURCE_EXHAUSTED = 2,
    // INVALID = 3), reason = 2, mcp_error = 3.
    let error = McpRequestResult {
        result: Some(mcp_request_result::Result::Error(AuthorizationError {
            code: Code::PermissionDenied as i32,
            reason: "r".into(),
            mcp_error: Some(b"{}".to_vec()),
        })),
        ..McpRequestResult::default()
    };
    assert_eq!(
        error.encode_to_vec(),
        [0x1a, 9, 0x08, 1, 0x12, 1, b'r', 0x1a, 2, b'{', b'}']
    );
    assert_eq!(
        [
            Code::Unknown,
            Code::PermissionDenied,
            Code::ResourceExhausted,
            Code::Invalid
        ]
        .map(|c| c as i32),
        [0, 1, 2, 3]
    );
}

#[test]
fn messages_round_trip() {
    let request = McpRequest {
        service_names: vec!["shop".into(), "other".into()],
        method: "tools/call".into(),
        metadata_context: None,
        mcp_request: Some(br#"{"name":"pay","arguments":{"amount":5}}"#.to_vec()),
        headers: vec![],
    };
    let bytes = request.encode_to_vec();
    assert_eq!(McpRequest::decode(bytes.as_slice()).unwrap(), request);
    // Truncated input is an error, not a panic.
    assert!(McpRequest::decode(&bytes[..bytes.len() - 3]).is_err());
}
