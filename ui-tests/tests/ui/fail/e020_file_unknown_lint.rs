orch::orchestration!(file = "tests/ui/fixtures/lonely.json", allow = [unreachable_stp]);

fn main() {}
