// Builds the npm packages, packs them and tests the packed tarballs installed into a
// fresh directory — what `cargo xtask test` runs for orch-node (after `npm ci`):
//
//   1. the native addon for this machine (napi build --platform) and the WebAssembly
//      module (napi build --target wasm32-wasip1-threads), in the workspace's target
//      directory, the dev profile unless --release; the TypeScript modules (tsc);
//   2. the per-platform packages laid out as napi-rs does (npm/<platform>/, from
//      `napi create-npm-dirs`), the built files copied in, and `npm pack` of the main
//      package, this platform's package and the wasm32-wasi package into
//      target/npm/packs;
//   3. a fresh directory (target/npm/fresh) with the three tarballs and the pinned AI SDK
//      installed from them and the registry, the tests copied in, and `node --test` run
//      there twice: on the native addon, and with NAPI_RS_FORCE_WASI=error on the
//      WebAssembly build; and the declarations type-checked as a TypeScript user sees them.
//
// Usage: node scripts/ci.mjs [--release]
import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const root = resolve(here, '..')
const release = process.argv.includes('--release')
const target = join(root, 'target')
const packs = join(target, 'npm', 'packs')
const fresh = join(target, 'npm', 'fresh')
const napi = join(here, 'node_modules', '.bin', 'napi')
const tsc = join(here, 'node_modules', '.bin', 'tsc')
// What the tests install beside the package: the AI SDK major the adapter is written for.
const PEERS = ['ai@7.0.173', '@ai-sdk/openai@4.0.118', 'zod@4.6.7']

function run(program, args, options = {}) {
  console.error(`orch-node: ${program.split('/').pop()} ${args.join(' ')}`)
  execFileSync(program, args, { stdio: 'inherit', cwd: here, ...options, env: { ...process.env, ...options.env } })
}

// 0. What the build needs, named before anything is built: without the WebAssembly
// target rustc fails deep in the build ("can't find crate for `core`").
function installedTargets() {
  try {
    return execFileSync('rustup', ['target', 'list', '--installed'], { encoding: 'utf8' })
      .split('\n')
      .map((line) => line.trim())
  } catch {
    // No rustup (a toolchain installed otherwise): let the build say what is missing.
    return null
  }
}
const targets = installedTargets()
if (targets !== null && !targets.includes('wasm32-wasip1-threads')) {
  console.error(
    'orch-node: the Rust target wasm32-wasip1-threads is not installed; the WebAssembly build needs it:\n' +
      '  rustup target add wasm32-wasip1-threads\n' +
      '(`cargo xtask test` installs it)',
  )
  process.exit(1)
}

// 1. Build.
const env = { CARGO_TARGET_DIR: target }
const profile = release ? ['--release'] : []
run(napi, ['build', '--platform', ...profile, '--js', 'index.js', '--dts', 'index.d.ts'], { env })
run(napi, ['build', '--platform', ...profile, '--target', 'wasm32-wasip1-threads'], { env })
run(tsc, ['-p', 'tsconfig.json'])

// 2. Lay out and pack.
rmSync(join(here, 'npm'), { recursive: true, force: true })
run(napi, ['create-npm-dirs'])
const native = readdirSync(here).find((f) => /^orch\..+\.node$/.test(f))
if (native === undefined) throw new Error('napi build wrote no .node file')
const platform = native.slice('orch.'.length, -'.node'.length)
rmSync(packs, { recursive: true, force: true })
mkdirSync(packs, { recursive: true })
const tarballs = []
for (const dir of [platform, 'wasm32-wasi']) {
  const pkgDir = join(here, 'npm', dir)
  const { files } = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'))
  for (const f of files) {
    if (!existsSync(join(here, f))) throw new Error(`${f} was not built (for npm/${dir})`)
    cpSync(join(here, f), join(pkgDir, f))
  }
  tarballs.push(pack(pkgDir))
}
tarballs.unshift(pack(here))

function pack(dir) {
  const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', packs], { cwd: dir, encoding: 'utf8' })
  const name = out.trim().split('\n').at(-1)
  console.error(`orch-node: packed ${name}`)
  return join(packs, name)
}

// 3. Install into a fresh directory and test there.
rmSync(fresh, { recursive: true, force: true })
mkdirSync(fresh, { recursive: true })
writeFileSync(join(fresh, 'package.json'), JSON.stringify({ name: 'orch-fresh', private: true, type: 'module' }, null, 2))
// The WebAssembly package declares `cpu: wasm32`, which npm refuses on this machine's CPU
// unless forced (a runtime that needs it installs it with `--cpu=wasm32`); here both
// builds sit side by side so that the same tests run on each.
run('npm', ['install', '--no-audit', '--no-fund', '--force', ...tarballs, ...PEERS], {
  cwd: fresh,
})
cpSync(join(here, 'test'), join(fresh, 'test'), { recursive: true })
cpSync(join(here, 'examples'), join(fresh, 'examples'), { recursive: true })
// The declarations, as a TypeScript user of the installed package sees them.
run(tsc, ['-p', join('test', 'types', 'tsconfig.json')], { cwd: fresh })
const tests = readdirSync(join(fresh, 'test'))
  .filter((f) => f.endsWith('.test.mjs'))
  .map((f) => join('test', f))
const testEnv = { ORCH_REPO: root, ORCH_EXPECT_INSTALLED: '1' }
run(process.execPath, ['--test', ...tests], { cwd: fresh, env: testEnv })
run(process.execPath, ['--test', ...tests], { cwd: fresh, env: { ...testEnv, NAPI_RS_FORCE_WASI: 'error' } })
console.error('orch-node: the packed packages passed on the native addon and on WebAssembly')
