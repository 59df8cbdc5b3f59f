orch::orchestration! {
    machine shop {
        tools: [search, pay],
        property pay_approved: pay approved;
        default step Chat;
    }
}

fn main() {}
