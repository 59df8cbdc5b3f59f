orch::orchestration!(file = "tests/ui/fixtures/e001.json");

fn main() {}
