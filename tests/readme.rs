//! The README's short example is real: its template is `examples/agents/researcher/`
//! (compiled by this package's build.rs, as a user's build.rs would), the host code below
//! is the README's, and the error it shows is what the compiler says.

orch::include_machine!("researcher");

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap()
}

/// The first fenced block of `lang` after `marker` in the README.
fn block(readme: &str, marker: &str, lang: &str) -> String {
    let from = readme
        .find(marker)
        .unwrap_or_else(|| panic!("README has {marker:?}"));
    let fence = format!("```{lang}\n");
    let start = readme[from..].find(&fence).unwrap() + from + fence.len();
    let end = readme[start..].find("```").unwrap() + start;
    readme[start..end].to_owned()
}

#[test]
fn the_template_is_the_one_built() {
    let file = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/agents/researcher/template.json"
    ))
    .unwrap();
    assert_eq!(
        block(
            &readme(),
            "A template (`agents/researcher/template.json`",
            "json"
        ),
        file
    );
}

#[test]
fn the_host_code_runs() {
    use researcher::{Outcome, Session, Step, Tool};

    let mut s = Session::new();
    s.on_user_message("Please research this");
    assert_eq!(s.step(), Some(Step::Research));
    assert_eq!(s.allowed().iter().collect::<Vec<_>>(), [Tool::Search]);
    assert!(s.check(Tool::Think).is_err());
    assert_eq!(
        s.check(Tool::Think).unwrap_err().to_string(),
        "the sequence of step `Research` expects `search` at position 0"
    );
    assert_eq!(s.record(Tool::Search), Outcome::Advanced { index: 1 });
    let saved: Vec<u8> = s.snapshot().to_bytes();
    assert!(!saved.is_empty());
    assert_eq!(std::mem::size_of::<Session>(), 128);
}

#[test]
fn the_error_is_what_the_compiler_says() {
    let readme = readme();
    let template = block(
        &readme,
        "A template (`agents/researcher/template.json`",
        "json",
    );
    let misspelled = template.replacen("\"sequence\": [\"search\"", "\"sequence\": [\"serch\"", 1);
    let compiled = orch::compiler::compile_json(&misspelled, None);
    let text = orch::compiler::diagnostic::SourceText::new(&misspelled);
    let rendered: Vec<String> = compiled
        .diagnostics
        .iter()
        .map(|d| {
            orch::compiler::diagnostic::render(d, "agents/researcher/template.json", &text, false)
        })
        .collect();
    let shown = block(&readme, "Misspell `search` in the sequence", "text");
    assert_eq!(rendered.join("\n\n") + "\n", shown);
}

/// The front page stays a front page: it sells, shows and links; the details live in
/// docs/. (A rule the build enforces: docs/architecture.md.)
#[test]
fn the_readme_is_at_most_200_lines() {
    let lines = readme().lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; move details to docs/"
    );
}

/// Every relative link of the README and of docs/README.md names a file that exists,
/// and docs/README.md lists every page in docs/.
#[test]
fn the_front_pages_link_to_files_that_exist_and_list_every_page() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let index = std::fs::read_to_string(root.join("docs/README.md")).unwrap();
    for (base, text) in [
        (root.to_path_buf(), readme()),
        (root.join("docs"), index.clone()),
    ] {
        for link in text.split("](").skip(1) {
            let target = link.split([')', '#']).next().unwrap_or("");
            if target.is_empty() || target.contains("://") {
                continue;
            }
            assert!(
                base.join(target).exists(),
                "a link to {target} from {}",
                base.display()
            );
        }
    }
    for entry in std::fs::read_dir(root.join("docs")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && name != "README.md" {
            assert!(
                index.contains(&format!("]({name})")),
                "docs/README.md lists {name}"
            );
        }
    }
}
