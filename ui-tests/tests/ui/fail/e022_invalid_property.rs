orch::orchestration! {
    machine shop {
        tools: [search, pay],
        property once: pay at_most 1;
        property once: pay never;
        default step Chat {
            allow: [search];
        }
    }
}

fn main() {}
