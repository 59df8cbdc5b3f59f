// The package's entry: the engine (the loader napi-rs generates, `index.js`: the native
// addon, else the WebAssembly module) and the error classes a caller catches by type.
// Written by hand, kept in git.
'use strict'

module.exports = require('./index.js')

/** An error orch throws whose `name` is `name`, as a class: `instanceof` is true for
 * every error of that name (those the engine throws, and those made with `new`). */
function errorClass(name) {
  const cls = class extends Error {
    constructor(message, options) {
      super(message, options)
      this.name = name
      this.code = name
    }

    static [Symbol.hasInstance](value) {
      return value instanceof Error && value.name === name
    }
  }
  Object.defineProperty(cls, 'name', { value: name })
  return cls
}

/** A template with errors (`compile`): `diagnostics` holds every finding. */
module.exports.TemplateError = errorClass('TemplateError')
/** Snapshot bytes that cannot be restored (`Machine.restore`, the AgentDock drop-in). */
module.exports.SnapshotError = errorClass('SnapshotError')
