// A rule reads a budget no `budget` declares: the closest name is suggested.
orch::orchestration! {
    machine Payments {
        tools: [send_money];
        budget "daily-spend": send_money sum "/amount" within "24h";
        rule "daily-limit": send_money require budget("daily-spent", max = 10000);
        default step Chat;
    }
}

fn main() {}
