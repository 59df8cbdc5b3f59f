orch::orchestration!(file = "tests/ui/fixtures/e025.json");

fn main() {}
