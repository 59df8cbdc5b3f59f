orch::orchestration!(file = "tests/ui/fixtures/e002.json");

fn main() {}
