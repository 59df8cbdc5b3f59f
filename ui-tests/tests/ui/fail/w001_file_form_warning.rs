// In the file form, warnings are errors too unless listed in `allow = [...]`.
orch::orchestration!(file = "tests/ui/fixtures/lonely.json");

fn main() {}
