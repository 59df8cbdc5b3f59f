//! What a host may ask of a state besides the events: whether a condition holds, and
//! the usage it adds.

use super::*;

impl<U, F, H, D, C, R> State<U, F, H, D, C, R>
where
    U: AsRef<[u64]> + AsMut<[u64]>,
    F: AsRef<[u64]> + AsMut<[u64]>,
    H: AsRef<[u16]> + AsMut<[u16]>,
    D: AsRef<[u64]> + AsMut<[u64]>,
    C: AsRef<[u16]> + AsMut<[u16]>,
    R: AsRef<[u64]> + AsMut<[u64]>,
{
    /// Does condition `k` of step `step` hold now? `None` for a step activation never
    /// chooses (the default step, a step without conditions) or out of range.
    pub fn condition_holds<S: AsRef<str>>(
        &self,
        t: &Tables<'_, S>,
        step: usize,
        k: usize,
    ) -> Option<bool> {
        let s = t.steps.get(step)?;
        if k >= s.conditions.len as usize {
            return None;
        }
        let atom = *t.plan.cond_atom.get(s.conditions.start as usize + k)?;
        (atom != NONE).then(|| bits::test(self.derived.as_ref(), atom as usize))
    }

    /// Usage (semantics §5): add to the cumulative token usage, saturating.
    pub fn add_usage(&mut self, prompt: u64, completion: u64) {
        self.usage.prompt = self.usage.prompt.saturating_add(prompt);
        self.usage.completion = self.usage.completion.saturating_add(completion);
    }
}
