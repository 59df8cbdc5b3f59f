//! The quick-start examples of orch live in this package's example targets
//! (`cognitive_reasoner`, `support_triage`, `dsl_agent`); its build script compiles the
//! agents in `agents/*/template.json` for them. The library itself is empty: a package
//! needs one target of its own.
