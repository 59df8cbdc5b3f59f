orch::orchestration!(file = "tests/ui/fixtures/e021.json");

fn main() {}
