// In the file form, warnings are errors too unless listed in `allow = [...]`.
orch_macros::orchestration!(file = "tests/ui/fixtures/lonely.json");

fn main() {}
