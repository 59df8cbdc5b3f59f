// A rule's number must be written as JSON writes it: `1_000` is not a JSON number.
orch::orchestration! {
    machine Payments {
        tools: [send_money];
        rule limit: send_money require "/amount" range(max = 1_000);
        default step Chat;
    }
}

fn main() {}
