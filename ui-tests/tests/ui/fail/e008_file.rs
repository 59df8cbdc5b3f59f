orch::orchestration!(file = "tests/ui/fixtures/e008.json");

fn main() {}
