/**
 * One piece of work at a time, in the order asked: what keeps the calls of one run (the
 * AI SDK adapter) or of one session (the AgentDock drop-in) from interleaving across
 * their `await`s. Internal to the package.
 *
 * @module
 */

/** A queue of asynchronous work, run one at a time in the order given. */
export class Serial {
  private tail: Promise<unknown> = Promise.resolve()
  private waiting = 0

  /** `onIdle`: called each time the last piece of work queued settles. */
  constructor(private readonly onIdle?: () => void) {}

  /** Runs `work` after everything given before it has settled (a failure included); at
   * once when nothing is queued. */
  run<T>(work: () => Promise<T>): Promise<T> {
    this.waiting += 1
    let next: Promise<T>
    if (this.waiting === 1) {
      try {
        next = Promise.resolve(work())
      } catch (e) {
        next = Promise.reject(e)
      }
    } else {
      next = this.tail.then(work, work)
    }
    const done = () => {
      this.waiting -= 1
      if (this.waiting === 0) this.onIdle?.()
    }
    this.tail = next.then(done, done)
    return next
  }

  /** Nothing is queued or running (checked once a piece of work has settled). */
  get idle(): boolean {
    return this.waiting === 0
  }
}
