//! A worker's copy of the transcripts it served, so a turn reads only the
//! messages it has not seen rather than the whole transcript through the journal.
//!
//! Stored messages are append-only: message `i` of a session never changes
//! once the envelope counts it. So messages `0..count` may be read outside the
//! journal (from this cache, or from the ingress's `messages` handler) and a
//! replay still meets the same transcript: the journal holds only the envelope
//! (count and digest), and the digest, a hash chained over the messages,
//! proves that what was read is what is stored.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use llm_core::Message;

/// The digest of an empty transcript (FNV-1a's offset basis).
pub(crate) const EMPTY_DIGEST: u64 = 0xcbf2_9ce4_8422_2325;

/// Chains `messages` onto `digest` (FNV-1a, 64 bits, over each message's JSON):
/// stable across builds and platforms, and a change of any message changes it.
pub(crate) fn chain(mut digest: u64, messages: &[Message]) -> u64 {
    for message in messages {
        let bytes = serde_json::to_vec(message).unwrap_or_default();
        for byte in bytes.iter().chain(b"\n") {
            digest ^= u64::from(*byte);
            digest = digest.wrapping_mul(0x0100_0000_01b3);
        }
    }
    digest
}

/// A session's transcript as this worker last stored or read it.
pub(crate) struct Cached {
    pub(crate) digest: u64,
    pub(crate) bytes: u64,
    pub(crate) messages: Vec<Message>,
}

/// Transcripts by session id, at most `budget` bytes (JSON) in all; the
/// oldest entries go first. A turn takes its session's entry out and puts the
/// new transcript back when it ends, so an entry is never shared.
pub(crate) struct TranscriptCache {
    budget: u64,
    inner: Mutex<CacheInner>,
    http: reqwest::Client,
}

#[derive(Default)]
struct CacheInner {
    entries: HashMap<String, Cached>,
    order: VecDeque<String>,
    bytes: u64,
}

/// The most a worker keeps of the transcripts it served: 256 MiB of JSON.
pub(crate) const CACHE_BUDGET: u64 = 256 << 20;

impl TranscriptCache {
    pub(crate) fn new(budget: u64) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        TranscriptCache { budget, inner: Mutex::new(CacheInner::default()), http }
    }

    fn take(&self, session: &str) -> Option<Cached> {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let cached = inner.entries.remove(session)?;
        inner.bytes = inner.bytes.saturating_sub(cached.bytes);
        inner.order.retain(|s| s != session);
        Some(cached)
    }

    /// Keeps a session's transcript (replacing what was kept), evicting the
    /// oldest entries past the budget; a transcript over the budget is not kept.
    pub(crate) fn put(&self, session: &str, cached: Cached) {
        if cached.bytes > self.budget {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(old) = inner.entries.remove(session) {
            inner.bytes = inner.bytes.saturating_sub(old.bytes);
            inner.order.retain(|s| s != session);
        }
        while inner.bytes + cached.bytes > self.budget {
            let Some(oldest) = inner.order.pop_front() else { break };
            if let Some(old) = inner.entries.remove(&oldest) {
                inner.bytes = inner.bytes.saturating_sub(old.bytes);
            }
        }
        inner.bytes += cached.bytes;
        inner.order.push_back(session.to_owned());
        inner.entries.insert(session.to_owned(), cached);
    }

    /// The session's first `count` stored messages, whose chained digest is
    /// `digest`: the kept copy, and what it lacks from the ingress's
    /// `AgentSession/<session>/messages` (the first URL of `ingress` that answers).
    /// `Err`: a retryable failure (no ingress answered) or, as `Ok(Err)`, a
    /// stored transcript that does not match its digest.
    pub(crate) async fn load(
        &self,
        ingress: &[String],
        session: &str,
        count: usize,
        digest: u64,
    ) -> Result<Result<Cached, String>, String> {
        let kept = self.take(session).filter(|c| c.messages.len() <= count);
        let from_kept = kept.is_some();
        let mut cached =
            kept.unwrap_or(Cached { digest: EMPTY_DIGEST, bytes: 0, messages: Vec::new() });
        for use_kept in [from_kept, false] {
            if !use_kept {
                cached = Cached { digest: EMPTY_DIGEST, bytes: 0, messages: Vec::new() };
            }
            let have = cached.messages.len();
            if have < count {
                let mut more = self.fetch(ingress, session, have).await?;
                more.truncate(count - have);
                if more.len() < count - have {
                    return Ok(Err(format!(
                        "the ingress gave {} of the session's {count} stored messages",
                        have + more.len()
                    )));
                }
                cached.digest = chain(cached.digest, &more);
                cached.bytes += more
                    .iter()
                    .map(|m| serde_json::to_vec(m).map_or(0, |b| b.len() as u64))
                    .sum::<u64>();
                cached.messages.extend(more);
            }
            if cached.digest == digest {
                return Ok(Ok(cached));
            }
            if !use_kept {
                break;
            }
        }
        Ok(Err(format!(
            "the session's stored messages do not match their digest ({:016x}, stored {digest:016x})",
            cached.digest
        )))
    }

    async fn fetch(
        &self,
        ingress: &[String],
        session: &str,
        from: usize,
    ) -> Result<Vec<Message>, String> {
        let mut failures = Vec::new();
        for base in ingress {
            let url = format!("{}/AgentSession/{session}/messages", base.trim_end_matches('/'));
            let sent = self
                .http
                .post(&url)
                .header("content-type", "application/json")
                .body(from.to_string())
                .send()
                .await;
            match sent {
                Ok(response) if response.status().is_success() => match response.bytes().await {
                    Ok(body) => {
                        return serde_json::from_slice(&body)
                            .map_err(|e| format!("the ingress's messages do not decode: {e}"));
                    }
                    Err(e) => failures.push(format!("{base}: {e}")),
                },
                Ok(response) => failures.push(format!("{base}: HTTP {}", response.status())),
                Err(e) => failures.push(format!("{base}: {e}")),
            }
        }
        Err(format!("no ingress gave the session's stored messages: {}", failures.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_chains_and_changes_with_any_message() {
        let a = Message::user("a");
        let b = Message::user("b");
        let both = chain(EMPTY_DIGEST, &[a.clone(), b.clone()]);
        assert_eq!(
            both,
            chain(chain(EMPTY_DIGEST, std::slice::from_ref(&a)), std::slice::from_ref(&b))
        );
        assert_ne!(both, chain(EMPTY_DIGEST, &[b, a]));
        assert_ne!(both, EMPTY_DIGEST);
    }

    #[test]
    fn the_cache_keeps_its_budget_and_hands_an_entry_out_once() {
        let cache = TranscriptCache::new(100);
        let entry = |bytes| Cached { digest: 1, bytes, messages: Vec::new() };
        cache.put("a", entry(60));
        cache.put("b", entry(60));
        assert!(cache.take("a").is_none(), "the oldest went past the budget");
        assert!(cache.take("b").is_some());
        assert!(cache.take("b").is_none(), "taken out");
        cache.put("c", entry(101));
        assert!(cache.take("c").is_none(), "over the budget on its own");
    }
}
