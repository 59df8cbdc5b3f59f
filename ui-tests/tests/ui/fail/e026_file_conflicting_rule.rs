orch::orchestration!(file = "tests/ui/fixtures/e026.json");

fn main() {}
