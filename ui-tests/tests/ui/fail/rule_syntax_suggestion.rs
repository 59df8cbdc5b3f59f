// An unknown test in a rule is an error on its token, with the closest test named.
orch::orchestration! {
    machine Payments {
        tools: [get_webpage];
        rule "our-sites": get_webpage require "/url" hots_in("bank.example");
        default step Chat;
    }
}

fn main() {}
