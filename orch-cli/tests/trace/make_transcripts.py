"""Builds the transcripts `orch check-trace` is tested on with the OpenAI and Anthropic
Python SDKs' own message types (offline: no client, no network), as an application that
logs its conversations would, and writes them as JSON into the directory given.

    python make_transcripts.py OUT_DIR
"""

import json
import pathlib
import sys

from anthropic.types import (
    AssistantMessageParam,
    Message,
    TextBlock,
    ToolResultBlockParam,
    ToolUseBlock,
    Usage,
    UserMessageParam,
)
from openai.types.chat import (
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.chat.chat_completion_message_function_tool_call import Function

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def openai_call(i, name, args):
    """An assistant turn as the SDK returns it (a ChatCompletionMessage), logged."""
    message = ChatCompletionMessage(
        role="assistant",
        content=None,
        tool_calls=[
            ChatCompletionMessageFunctionToolCall(
                id=f"call_{i}", type="function", function=Function(name=name, arguments=json.dumps(args))
            )
        ],
    )
    return message.model_dump(exclude_none=True)


def openai_result(i, text):
    return ChatCompletionToolMessageParam(role="tool", tool_call_id=f"call_{i}", content=text)


def openai_trace(user, calls, answered=True):
    messages = [
        ChatCompletionSystemMessageParam(role="system", content="You are the Cognitive Reasoner."),
        ChatCompletionUserMessageParam(role="user", content=user),
    ]
    for i, (name, args) in enumerate(calls):
        messages.append(openai_call(i, name, args))
        messages.append(openai_result(i, f"{name} done"))
    if answered:
        messages.append(ChatCompletionMessage(role="assistant", content="Done.").model_dump(exclude_none=True))
    return messages


def anthropic_turn(i, name, args):
    """An assistant turn as the SDK returns it (a Message), kept in the history."""
    message = Message(
        id=f"msg_{i}",
        type="message",
        role="assistant",
        model="claude-test",
        content=[TextBlock(type="text", text="Working on it."), ToolUseBlock(type="tool_use", id=f"toolu_{i}", name=name, input=args)],
        stop_reason="tool_use",
        stop_sequence=None,
        usage=Usage(input_tokens=10, output_tokens=5),
    )
    return AssistantMessageParam(role="assistant", content=[b.model_dump(exclude_none=True) for b in message.content])


def anthropic_result(i, text):
    return UserMessageParam(
        role="user", content=[ToolResultBlockParam(type="tool_result", tool_use_id=f"toolu_{i}", content=text)]
    )


research = "Research the impact of AI on jobs"
(out / "openai_follows.json").write_text(
    json.dumps(openai_trace(research, [("search", {"input": "AI jobs"}), ("think", {"input": "x"}), ("reflect", {"input": "y"})]))
)
(out / "openai_out_of_order.json").write_text(
    json.dumps(openai_trace(research, [("think", {"input": "too early"}), ("search", {"input": "AI jobs"})]))
)

# The refund desk: the refund before the lookup, then the lookup; and a refund the model
# asked for that the application never ran (no tool_result).
history = [UserMessageParam(role="user", content="Please refund order A-1")]
history += [anthropic_turn(0, "issue_refund", {"order": "A-1", "amount": 10}), anthropic_result(0, "refunded")]
history += [anthropic_turn(1, "lookup_order", {"order": "A-1"}), anthropic_result(1, "found")]
history += [anthropic_turn(2, "issue_refund", {"order": "A-1", "amount": 10})]
(out / "anthropic_refund.json").write_text(json.dumps({"model": "claude-test", "messages": history}))

print(json.dumps(sorted(p.name for p in out.iterdir())))
