#!/usr/bin/env python3
"""Builds agentgateway from its source at a release tag, for the agentgateway bench.

    python3 orch-policy/benches/agentgateway/build.py                 # clone v1.4.1 from GitHub
    python3 orch-policy/benches/agentgateway/build.py --source DIR    # a git clone (or mirror) holding the tag
    python3 orch-policy/benches/agentgateway/build.py --crates-io     # see below

It exports the tag's tree into OUT/src (default `target/agentgateway`), builds
`agentgateway-app` in release mode with the toolchain the tree pins
(`rust-toolchain.toml`, installed by rustup on first use) and prints the binary's path on
its last line.

agentgateway v1.4.1 patches four crates to forks and takes two more from git
(`[patch.crates-io]` in its Cargo.toml: schemars, wiremock and async-openai on GitHub,
http-serde on gitlab.com; google-cloud-auth on GitHub). Where those hosts are reachable
cargo fetches them and nothing here changes the tree. Where only crates.io is reachable,
`--crates-io` builds against crates.io releases instead and adds, in a local copy, what
the forks add and the gateway uses:

- schemars 1.2.1: `JsonSchema` for `arcstr::ArcStr` behind an `arcstr1` feature (as
  schemars does for `smol_str`);
- async-openai 0.41.1: the fields and variants agentgateway's LLM conversions name
  (prompt-cache breakpoints, `ReasoningEffort::Max`, a tool call's `caller`, cache-write
  token counts, three more Responses input items and a tool choice), each optional and
  skipped when absent, so a request or response without them has the same bytes;
- http-serde 2.1.1: (de)serializers for `http::uri::Scheme` and `http::HeaderName`, as
  for the other `http` types;
- wiremock 0.6 without the fork's `tls` feature; the one test helper that needs it
  (`test_helpers/proxymock.rs`) and the module of the tests' common code that uses it
  (`http/tests_common.rs`) are compiled for agentgateway's unit tests only;
- google-cloud-auth from crates.io (1.10).

None of this touches the MCP or policy paths the bench measures; the LLM conversions are
compiled but not exercised.
"""

import argparse
import io
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request

TAG = "v1.4.1"
REPO = "https://github.com/agentgateway/agentgateway"
TOOLCHAIN = "1.97"


def die(message):
    print(f"build.py: {message}", file=sys.stderr)
    sys.exit(1)


def run(cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), flush=True)
    result = subprocess.run(cmd, **kw)
    if result.returncode != 0:
        die(f"`{' '.join(str(c) for c in cmd)}` failed with status {result.returncode}")
    return result


def export(git_dir, tag, dest):
    """Writes the tree of `tag` in `git_dir` to `dest`, blob by blob (a mirror may lack
    a few large blobs: those are named, and only files outside the build may be missing)."""
    listing = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "-r", "-z", tag],
        capture_output=True, check=False)
    if listing.returncode != 0:
        die(f"{git_dir} has no tag {tag}: {listing.stderr.decode(errors='replace').strip()}")
    entries = []
    for record in listing.stdout.split(b"\0"):
        if not record:
            continue
        meta, path = record.split(b"\t", 1)
        mode, kind, sha = meta.split(b" ")
        if kind == b"blob":
            entries.append((mode.decode(), sha.decode(), path.decode()))
    batch = subprocess.Popen(["git", "--git-dir", git_dir, "cat-file", "--batch"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    missing = []
    for mode, sha, path in entries:
        batch.stdin.write(sha.encode() + b"\n")
        batch.stdin.flush()
        header = batch.stdout.readline().split()
        if len(header) < 3:
            missing.append(path)
            continue
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            target.symlink_to(data.decode())
            continue
        target.write_bytes(data)
        if mode == "100755":
            target.chmod(0o755)
    batch.stdin.close()
    batch.wait()
    needed = [p for p in missing if p.startswith("crates/") or p.endswith((".toml", ".lock", ".rs"))]
    if needed:
        die("the tree lacks files the build needs: " + ", ".join(needed))
    for path in missing:
        print(f"note: {path} is absent from {git_dir} (not needed to build)")
    return len(entries)


def source_tree(args, out):
    src = out / "src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    if args.source:
        git_dir = pathlib.Path(args.source)
        if (git_dir / ".git").exists():
            git_dir = git_dir / ".git"
    else:
        git_dir = out / "clone.git"
        if not git_dir.exists():
            run(["git", "clone", "--bare", "--depth", "1", "--branch", TAG, REPO, git_dir])
        run(["git", "--git-dir", git_dir, "fetch", "--depth", "1", "origin",
             f"+refs/tags/{TAG}:refs/tags/{TAG}"])
    count = export(str(git_dir), TAG, src)
    revision = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", f"{TAG}^{{commit}}"],
                              capture_output=True, text=True).stdout.strip()
    print(f"exported {count} files of agentgateway {TAG} ({revision}) to {src}")
    return src, revision


def crate(name, version, vendor):
    """A crates.io release unpacked under `vendor`."""
    dest = vendor / f"{name}-{version}"
    if dest.exists():
        shutil.rmtree(dest)
    url = f"https://static.crates.io/crates/{name}/{name}-{version}.crate"
    with urllib.request.urlopen(url, timeout=60) as response:
        data = response.read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        archive.extractall(vendor, filter="data")
    return dest


def edit(path, old, new, count=1):
    text = path.read_text()
    found = text.count(old)
    if found != count:
        die(f"{path}: expected {count} of {old!r}, found {found} (a different release?)")
    path.write_text(text.replace(old, new))


def edit_after(path, start, old, new):
    """Replaces the first `old` after the first `start` in `path`."""
    text = path.read_text()
    begin = text.find(start)
    at = text.find(old, begin) if begin >= 0 else -1
    if at < 0:
        die(f"{path}: no {old!r} after {start!r} (a different release?)")
    path.write_text(text[:at] + new + text[at + len(old):])


OPTIONAL = '#[serde(default, skip_serializing_if = "Option::is_none")]\n'


def schemars(vendor):
    root = crate("schemars", "1.2.1", vendor)
    edit(root / "Cargo.toml", "\n[features]\n",
         '\n[features]\narcstr1 = ["dep:arcstr1"]\n')
    with open(root / "Cargo.toml", "a") as f:
        f.write('\n[dependencies.arcstr1]\nversion = "1"\noptional = true\n'
                'default-features = false\npackage = "arcstr"\n')
    impls = root / "src/json_schema_impls/mod.rs"
    with open(impls, "a") as f:
        f.write('\n#[cfg(feature = "arcstr1")]\n'
                'forward_impl!(arcstr1::ArcStr => alloc::string::String);\n')
    return root


def async_openai(vendor):
    root = crate("async-openai", "0.41.1", vendor)
    types = root / "src/types"
    shared = types / "shared"
    (shared / "prompt_cache.rs").write_text('''use serde::{Deserialize, Serialize};

/// Marks where a reusable prompt prefix ends.
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
pub struct PromptCacheBreakpointParam {
    pub mode: PromptCacheBreakpointMode,
}

/// How a prompt-cache breakpoint was set.
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PromptCacheBreakpointMode {
    Explicit,
}
''')
    with open(shared / "mod.rs", "a") as f:
        f.write('\n#[cfg(any(feature = "chat-completion-types", feature = "response-types"))]\n'
                'mod prompt_cache;\n'
                '#[cfg(any(feature = "chat-completion-types", feature = "response-types"))]\n'
                'pub use prompt_cache::*;\n')
    edit(types / "chat/mod.rs", "pub use crate::types::shared::ReasoningEffort;\n",
         "pub use crate::types::shared::ReasoningEffort;\n"
         "pub use crate::types::shared::{PromptCacheBreakpointMode, PromptCacheBreakpointParam};\n")
    edit(types / "responses/mod.rs", "pub use crate::types::shared::ReasoningEffort;\n",
         "pub use crate::types::shared::ReasoningEffort;\n"
         "pub use crate::types::shared::{PromptCacheBreakpointMode, PromptCacheBreakpointParam};\n")
    edit(shared / "reasoning_effort.rs", "    Xhigh,\n", "    Xhigh,\n    Max,\n")
    edit(shared / "response_usage.rs", "    pub cached_tokens: u32,\n}",
         "    pub cached_tokens: u32,\n    " + OPTIONAL + "    pub cache_write_tokens: Option<u32>,\n}")
    breakpoint = "    " + OPTIONAL + "    pub prompt_cache_breakpoint: Option<crate::types::shared::PromptCacheBreakpointParam>,\n"
    chat = types / "chat/chat_.rs"
    edit(chat, "pub struct ChatCompletionRequestMessageContentPartText {\n    pub text: String,\n",
         "pub struct ChatCompletionRequestMessageContentPartText {\n    pub text: String,\n" + breakpoint)
    edit(chat, "pub struct ChatCompletionRequestMessageContentPartImage {\n    pub image_url: ImageUrl,\n",
         "pub struct ChatCompletionRequestMessageContentPartImage {\n    pub image_url: ImageUrl,\n" + breakpoint)
    edit(types / "chat/impls.rs", "ChatCompletionRequestMessageContentPartText { text: value.into() }",
         "ChatCompletionRequestMessageContentPartText { text: value.into(), prompt_cache_breakpoint: None }")
    edit(types / "chat/impls.rs", "ChatCompletionRequestMessageContentPartText { text: value }",
         "ChatCompletionRequestMessageContentPartText { text: value, prompt_cache_breakpoint: None }")
    edit(types / "chat/impls.rs", "ChatCompletionRequestMessageContentPartImage { image_url: value }",
         "ChatCompletionRequestMessageContentPartImage { image_url: value, prompt_cache_breakpoint: None }")
    response = types / "responses/response.rs"
    edit(response, "pub struct InputTextContent {\n    /// The text input to the model.\n    pub text: String,\n",
         "pub struct InputTextContent {\n    /// The text input to the model.\n    pub text: String,\n" + breakpoint)
    edit(types / "responses/impls.rs", "InputTextContent { text: text.into() }",
         "InputTextContent { text: text.into(), prompt_cache_breakpoint: None }", count=2)
    edit_after(response, "pub struct FunctionToolCall {", "    /// The name of the function to run.\n    pub name: String,\n",
         "    /// The name of the function to run.\n    pub name: String,\n"
         "    " + OPTIONAL + "    pub caller: Option<serde_json::Value>,\n")
    edit(response, "    /// Forces the model to call the function shell tool when a tool call is required.\n    Shell,\n",
         "    /// Forces the model to call the function shell tool when a tool call is required.\n    Shell,\n\n"
         "    ProgrammaticToolCalling(serde_json::Map<String, serde_json::Value>),\n")
    edit(response, "    EasyMessage(EasyInputMessage),\n}",
         "    EasyMessage(EasyInputMessage),\n\n"
         "    Program(TypedInputItem<ProgramTag>),\n"
         "    ProgramOutput(TypedInputItem<ProgramOutputTag>),\n"
         "    CompactionTrigger(TypedInputItem<CompactionTriggerTag>),\n}\n\n"
         + TYPED_ITEMS)
    # The response (not the request, which also has a retention field) gains two fields.
    retention = "    pub prompt_cache_retention: Option<PromptCacheRetention>,\n"
    edit_after(response, "pub struct Response {", retention, retention
               + "\n    " + OPTIONAL + "    pub prompt_cache_options: Option<serde_json::Value>,\n"
               + "\n    " + OPTIONAL + "    pub moderation: Option<serde_json::Value>,\n")
    return root


# Input items the crates.io release does not know, kept as their JSON and told apart by
# their `type` (so they never swallow an item another variant should read).
TYPED_ITEMS = '''macro_rules! input_item_tag {
    ($name:ident, $tag:literal) => {
        #[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq)]
        pub enum $name {
            #[serde(rename = $tag)]
            Tag,
        }
    };
}
input_item_tag!(ProgramTag, "program");
input_item_tag!(ProgramOutputTag, "program_output");
input_item_tag!(CompactionTriggerTag, "compaction_trigger");

/// An input item of one `type`, its other fields kept as they came.
#[derive(Debug, Serialize, Deserialize, Clone, PartialEq)]
pub struct TypedInputItem<T> {
    pub r#type: T,
    #[serde(flatten)]
    pub fields: serde_json::Map<String, serde_json::Value>,
}
'''


# A (de)serializer module for an `http` type that parses from and prints as a string,
# shaped as http-serde's own modules are (so its `option` boilerplate takes it too).
HTTP_SERDE_STR_MODULE = """
/// For `{ty}`
///
/// `#[serde(with = "http_serde::{name}")]`
pub mod {name} {{
    use serde::de::{{self, Unexpected, Visitor}};
    use serde::{{Deserializer, Serializer}};
    use std::fmt;

    /// Implementation detail. Use derive annotations instead.
    pub fn serialize<S: Serializer>(value: &{ty}, ser: S) -> Result<S::Ok, S::Error> {{
        ser.serialize_str(value.as_str())
    }}

    pub(crate) struct {visitor};

    impl {visitor} {{
        #[inline]
        pub(crate) fn new<'de, D: Deserializer<'de>>(_: &D) -> Self {{
            Self
        }}
    }}

    impl<'de> Visitor<'de> for {visitor} {{
        type Value = {ty};

        fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {{
            formatter.write_str("{name}")
        }}

        fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {{
            deserializer.deserialize_str(self)
        }}

        fn visit_str<E: de::Error>(self, val: &str) -> Result<Self::Value, E> {{
            val.parse()
                .map_err(|_| de::Error::invalid_value(Unexpected::Str(val), &self))
        }}
    }}

    /// Implementation detail.
    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<{ty}, D::Error> {{
        de.deserialize_str({visitor})
    }}
}}
"""


def http_serde(vendor):
    root = crate("http-serde", "2.1.1", vendor)
    lib = root / "src/lib.rs"
    added = [("scheme", "::http::uri::Scheme", "SchemeVisitor"),
             ("header_name", "::http::HeaderName", "HeaderNameVisitor")]
    modules = "".join(HTTP_SERDE_STR_MODULE.format(name=n, ty=ty, visitor=v) for n, ty, v in added)
    boilerplate = "".join(f"    boilerplate! {{ {n}, {ty}, crate::{n}::{v} }}\n" for n, ty, v in added)
    anchor = "    boilerplate! { authority, ::http::uri::Authority, crate::authority::AuthorityVisitor }\n"
    edit(lib, anchor, anchor + boilerplate)
    edit(lib, "pub mod option {", modules.lstrip("\n") + "\npub mod option {")
    return root


def crates_io(src, vendor):
    """Replaces the git dependencies and forks of `src/Cargo.toml` with crates.io
    releases and the local copies above."""
    manifest = src / "Cargo.toml"
    text = manifest.read_text()
    text, n = re.subn(r"\A\[patch\.crates-io\]\n(?:[^\n]+\n)+\n", "", text)
    if n != 1:
        die(f"{manifest}: no leading [patch.crates-io] block (a different release?)")
    replacements = [
        (r'google-cloud-auth = \{ git = "[^"]+", rev = "[0-9a-f]+",', 'google-cloud-auth = { version = "1.10",'),
        (r'schemars = \{ version = "=1\.2\.1", git = "[^"]+", rev = "[0-9a-f]+",', 'schemars = { version = "=1.2.1",'),
        (r'wiremock = \{ version = "0\.6", features = \["tls"\] \}', 'wiremock = { version = "0.6" }'),
        (r'async-openai = \{ version = "0\.41",', 'async-openai = { version = "=0.41.1",'),
    ]
    for pattern, replacement in replacements:
        text, n = re.subn(pattern, replacement, text)
        if n != 1:
            die(f"{manifest}: expected one match of {pattern}, found {n}")
    schemars_dir = schemars(vendor)
    openai_dir = async_openai(vendor)
    http_serde_dir = http_serde(vendor)
    text += ("\n[patch.crates-io]\n"
             f'schemars = {{ path = "{schemars_dir}" }}\n'
             f'async-openai = {{ path = "{openai_dir}" }}\n'
             f'http-serde = {{ path = "{http_serde_dir}" }}\n')
    manifest.write_text(text)
    # wiremock's fork-only TLS is used by one test helper and the tests' common module.
    edit(src / "crates/agentgateway/src/test_helpers/mod.rs", "\npub mod proxymock;\n",
         "\n#[cfg(test)]\npub mod proxymock;\n")
    edit(src / "crates/agentgateway/src/http/mod.rs", "\npub mod tests_common;\n",
         "\n#[cfg(test)]\npub mod tests_common;\n")
    lock = src / "Cargo.lock"
    if lock.exists():
        lock.unlink()  # the lock names the git sources; cargo resolves again


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", help="a git clone or mirror of agentgateway holding the tag")
    parser.add_argument("--crates-io", action="store_true",
                        help="build against crates.io releases instead of the forks")
    parser.add_argument("--out", default="target/agentgateway", help="where to export and build")
    parser.add_argument("--no-build", action="store_true",
                        help="export (and patch) the tree, print its path, build nothing")
    args = parser.parse_args()
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    src, revision = source_tree(args, out)
    if args.crates_io:
        crates_io(src, out / "vendor")
    if args.no_build:
        print(src)
        return
    env = dict(os.environ, VERSION=TAG, GIT_REVISION=revision,
               CARGO_TARGET_DIR=str(out / "target"))
    run(["rustup", "toolchain", "install", TOOLCHAIN, "--profile", "minimal"])
    run(["cargo", f"+{TOOLCHAIN}", "build", "--release", "-p", "agentgateway-app"], cwd=src, env=env)
    binary = out / "target/release/agentgateway"
    if not binary.exists():
        die(f"the build finished but {binary} is missing")
    print(binary)


if __name__ == "__main__":
    main()
