orch::orchestration!(file = "tests/ui/fixtures/e003.json");

fn main() {}
