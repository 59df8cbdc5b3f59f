// A rule on a tool the template does not declare.
orch::orchestration! {
    machine Payments {
        tools: [send_money, get_contacts];
        default step Chat;
        step Paying {
            when tool_used(get_contacts);
            rule known: send_mony require "/iban" in_result(get_contacts, "/*/iban");
        }
    }
}

fn main() {}
