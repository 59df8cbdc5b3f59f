// A range whose bounds are out of order can never hold.
orch::orchestration! {
    machine Payments {
        tools: [send_money];
        approve send_money when "/amount" range(min = 500, max = 100);
        default step Chat;
    }
}

fn main() {}
