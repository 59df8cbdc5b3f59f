orch::orchestration!(file = "tests/ui/fixtures/lonely.json", allow = [unreachable_step]);

fn main() {
    let s = lonely::Session::new();
    assert_eq!(s.step(), Some(lonely::Step::Idle));
}
