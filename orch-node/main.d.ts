// The package's entry: the engine's generated declarations and the error classes.
export * from './index'
import type { Diagnostic } from './index'

/** A template with errors, as `compile` throws it: every finding in `diagnostics`.
 * `instanceof TemplateError` is true for every error orch throws with this name. */
export declare class TemplateError extends Error {
  constructor(message?: string, options?: ErrorOptions)
  readonly name: 'TemplateError'
  readonly code: 'TemplateError'
  /** Every diagnostic (errors and warnings), in source order. */
  diagnostics: Diagnostic[]
}

/** Snapshot bytes that cannot be restored (`Machine.restore`, the AgentDock drop-in).
 * `instanceof SnapshotError` is true for every error orch throws with this name. */
export declare class SnapshotError extends Error {
  constructor(message?: string, options?: ErrorOptions)
  readonly name: 'SnapshotError'
  readonly code: 'SnapshotError'
}
