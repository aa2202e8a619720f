//! The fault matrix: every provider driven through transport faults and hostile servers.
//!
//! A provider crate runs the rows on its own fixtures with [`check_faults`](crate::check_faults);
//! `cargo xtask faults` runs them over every provider of the workspace.
//!
//! Every provider is driven through transport and wire faults built from its own
//! recorded streams (`fixtures/<provider>/text-only` and `tool-call-single`), so
//! no per-provider fault fixtures are needed. A raw TCP server
//! ([`rawserver`]) writes the HTTP/1.1 bytes by hand: resets, stalls,
//! error statuses, invalid bytes, an endless event, a stream cut short or with
//! its terminal event twice.
//!
//! Each cell records the requests the server received, the backoff delays the
//! recording clock was asked for (no real sleeping, no jitter), and the final
//! outcome (`done` or the error kind), and checks them against the row's
//! expectation, which is the same for every provider. It also checks that
//! exactly one terminal event arrived, that the events agree with the final
//! message, that the content before a mid-stream fault is kept (a prefix of the
//! full response, the same for every fault at that point and every way of
//! writing the bytes), and that every connection was closed afterwards.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use llm_core::{
    AssistantContent, AssistantEvent, AssistantMessage, ErrorKind, RecordingSleeper, StreamOptions,
};

use llm_testkit::fixture::{self, Canned, Fixture, Responses, Scenario};
use llm_testkit::server::split_stream;

use crate::rawserver::{
    self, RawServer, Script, Step, chunk, end_chunks, status_response, stream_head,
};
use crate::{Error, ProviderEntry, Result, loopback_base_url, stream_options};

/// The short timeout used by the timeout rows (a behaviour check, not a timing assertion).
pub const SHORT: Duration = Duration::from_millis(300);
/// The total limit of the total-timeout row.
pub const TOTAL: Duration = Duration::from_millis(600);
/// `max_event_bytes` for the oversize row.
pub const MAX_EVENT: usize = 8 * 1024 * 1024;
/// The oversize event is endless; the server gives up after this many bytes.
const ENDLESS_MAX: usize = 64 * 1024 * 1024;
/// An endless error body may be written this far per attempt: the client's 1 MiB limit, plus
/// what the sockets hold in flight.
const ENDLESS_ERROR_READ: usize = 8 * 1024 * 1024;
/// A replay that takes longer than this hangs.
const CELL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the client may take to close its connections after a stream ended.
const CLOSE_GRACE: Duration = Duration::from_secs(3);
/// Pause between the last bytes and a reset, so the bytes are read first.
const BEFORE_RESET: Duration = Duration::from_millis(150);
/// Cells run at the same time.
const PARALLEL: usize = 16;

/// The `retry-after` header of a status row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RetryHeader {
    None,
    /// `retry-after: 2` (seconds).
    Seconds,
    /// `retry-after-ms: 1500`.
    Millis,
}

/// One fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Refused,
    ConnectTimeout,
    ResetBeforeHeaders { exhausted: bool },
    ResetAfterHeaders,
    FirstByteTimeout,
    IdleBeforeContent,
    ResetMidStream,
    IdleMidStream,
    TotalMidStream,
    Status { status: u16, header: RetryHeader, exhausted: bool },
    InvalidUtf8,
    MalformedJson,
    Oversize,
    Truncated,
    DuplicatedTerminal,
    Hostile(Hostile),
}

/// A hostile status line, header or body before the stream (one row each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hostile {
    /// `retry-after: 1e30`: too large for a `Duration`.
    AbsurdRetryAfter,
    /// `retry-after: 99999999999999999999` (past `u64`).
    HugeRetryAfter,
    /// `retry-after: -5`: not a wait, so the backoff applies.
    NegativeRetryAfter,
    /// A `retry-after` date 2 s after the response's `date`, both in 1994 (clock skew).
    DateAhead,
    /// A `retry-after` date before the response's `date`: no wait.
    DatePast,
    /// A `retry-after` date an hour after the response's `date`: over the cap.
    DateFarFuture,
    /// Header values with bytes 0x80-0xFF (a `retry-after` among them).
    NonAsciiHeaders,
    /// A header value with a control byte, which HTTP forbids.
    InvalidHeaderBytes,
    /// One header of 1 MiB.
    HugeHeader,
    /// 10,000 headers.
    ManyHeaders,
    /// `103 Early Hints` before the 200.
    Informational,
    /// A `302` to another URL.
    Redirect,
    /// Status 599, then 200.
    Status599,
    /// Status 999.
    Status999,
    /// A 200 HTML page instead of the stream.
    HtmlInsteadOfStream,
    /// A 500 whose body never ends.
    EndlessErrorBody,
}

impl Hostile {
    const ALL: [Hostile; 16] = [
        Hostile::AbsurdRetryAfter,
        Hostile::HugeRetryAfter,
        Hostile::NegativeRetryAfter,
        Hostile::DateAhead,
        Hostile::DatePast,
        Hostile::DateFarFuture,
        Hostile::NonAsciiHeaders,
        Hostile::InvalidHeaderBytes,
        Hostile::HugeHeader,
        Hostile::ManyHeaders,
        Hostile::Informational,
        Hostile::Redirect,
        Hostile::Status599,
        Hostile::Status999,
        Hostile::HtmlInsteadOfStream,
        Hostile::EndlessErrorBody,
    ];

    fn name(self) -> &'static str {
        match self {
            Hostile::AbsurdRetryAfter => "http 429 retry-after: 1e30",
            Hostile::HugeRetryAfter => "http 429 retry-after: 99999999999999999999",
            Hostile::NegativeRetryAfter => "http 429 retry-after: -5, then 200",
            Hostile::DateAhead => "http 503 retry-after: date + 2 s (1994 clock), then 200",
            Hostile::DatePast => "http 503 retry-after: a date before date:, then 200",
            Hostile::DateFarFuture => "http 429 retry-after: date + 1 h",
            Hostile::NonAsciiHeaders => "http 429 non-ascii header bytes, then 200",
            Hostile::InvalidHeaderBytes => "control byte in a header value, every time",
            Hostile::HugeHeader => "1 MiB header, every time",
            Hostile::ManyHeaders => "10000 headers, every time",
            Hostile::Informational => "http 103 early hints, then 200",
            Hostile::Redirect => "http 302 location: elsewhere",
            Hostile::Status599 => "http 599, then 200",
            Hostile::Status999 => "http 999",
            Hostile::HtmlInsteadOfStream => "http 200 text/html page",
            Hostile::EndlessErrorBody => "http 500 endless error body, every time",
        }
    }

    fn expect(self) -> Expect {
        let done = |requests, sleeps: Vec<u64>| Expect {
            outcome: "done",
            requests,
            sleeps,
            content: Content::Full,
        };
        let failed = |outcome, requests, sleeps: Vec<u64>| Expect {
            outcome,
            requests,
            sleeps,
            content: Content::Empty,
        };
        match self {
            // Over the 60 s cap: no wait, no retry.
            Hostile::AbsurdRetryAfter | Hostile::HugeRetryAfter | Hostile::DateFarFuture => {
                failed("rate_limited", 1, Vec::new())
            }
            Hostile::NegativeRetryAfter | Hostile::NonAsciiHeaders | Hostile::Status599 => {
                done(2, vec![500])
            }
            Hostile::DateAhead => done(2, vec![2000]),
            Hostile::DatePast => done(2, vec![0]),
            Hostile::InvalidHeaderBytes | Hostile::HugeHeader | Hostile::ManyHeaders => {
                failed("transport", 3, vec![500, 1000])
            }
            Hostile::Informational => done(1, Vec::new()),
            Hostile::Redirect | Hostile::Status999 => failed("provider", 1, Vec::new()),
            Hostile::HtmlInsteadOfStream => failed("decode", 1, Vec::new()),
            Hostile::EndlessErrorBody => failed("overloaded", 3, vec![500, 1000]),
        }
    }
}

/// The 1994 instant of RFC 9110's examples, as a `date` header.
const RFC_DATE: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

/// A hand-written response head (`headers` as raw bytes, each line without its CRLF).
fn raw_head(status_line: &str, headers: &[&[u8]], length: Option<usize>) -> Vec<u8> {
    let mut out = format!("{status_line}\r\n").into_bytes();
    for header in headers {
        out.extend_from_slice(header);
        out.extend_from_slice(b"\r\n");
    }
    match length {
        Some(n) => out.extend_from_slice(format!("content-length: {n}\r\n").as_bytes()),
        None => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"connection: close\r\n\r\n");
    out
}

/// What the matrix's error bodies look like.
fn fault_body(status: u16) -> String {
    format!("{{\"error\":{{\"message\":\"injected fault: HTTP {status}\",\"code\":{status}}}}}")
}

/// What the matrix's server writes for a hostile row, connection by connection.
fn hostile_scripts(recorded: &Recorded, hostile: Hostile) -> Vec<Script> {
    let error = |status: u16, headers: &[(&str, &str)]| {
        vec![Step::Write(status_response(status, headers, &fault_body(status)))]
    };
    let raw = |bytes: Vec<u8>| vec![Step::Write(Bytes::from(bytes))];
    let retry_date = |after: &'static str| {
        let headers: Vec<(&str, &str)> = vec![("date", RFC_DATE), ("retry-after", after)];
        headers
    };
    match hostile {
        Hostile::AbsurdRetryAfter => {
            vec![error(429, &[("retry-after", "1e30")]), recorded.success()]
        }
        Hostile::HugeRetryAfter => {
            vec![error(429, &[("retry-after", "99999999999999999999")]), recorded.success()]
        }
        Hostile::NegativeRetryAfter => {
            vec![error(429, &[("retry-after", "-5")]), recorded.success()]
        }
        Hostile::DateAhead => {
            vec![error(503, &retry_date("Sun, 06 Nov 1994 08:49:39 GMT")), recorded.success()]
        }
        Hostile::DatePast => {
            vec![error(503, &retry_date("Sunday, 06-Nov-94 08:00:00 GMT")), recorded.success()]
        }
        Hostile::DateFarFuture => {
            vec![error(429, &retry_date("Sun Nov  6 09:49:37 1994")), recorded.success()]
        }
        Hostile::NonAsciiHeaders => {
            let body = fault_body(429);
            let mut bytes = raw_head(
                "HTTP/1.1 429 Too Many Requests",
                &[
                    b"x-note: caf\xe9 \xff\xfe",
                    b"retry-after: \xe2\x88\x9e",
                    b"x-amzn-ErrorType: \xc3",
                ],
                Some(body.len()),
            );
            bytes.extend_from_slice(body.as_bytes());
            vec![raw(bytes), recorded.success()]
        }
        Hostile::InvalidHeaderBytes => {
            let mut head = recorded.head().to_vec();
            // After the status line: a header whose value holds a NUL byte.
            let at = head.windows(2).position(|w| w == b"\r\n").map_or(0, |i| i + 2);
            head.splice(at..at, b"x-bad: a\x00b\r\n".iter().copied());
            vec![raw(head); 3]
        }
        Hostile::HugeHeader => {
            let mut head = recorded.head().to_vec();
            let at = head.windows(2).position(|w| w == b"\r\n").map_or(0, |i| i + 2);
            let mut header = b"x-huge: ".to_vec();
            header.extend(std::iter::repeat_n(b'h', 1 << 20));
            header.extend_from_slice(b"\r\n");
            head.splice(at..at, header);
            vec![raw(head); 3]
        }
        Hostile::ManyHeaders => {
            let mut head = recorded.head().to_vec();
            let at = head.windows(2).position(|w| w == b"\r\n").map_or(0, |i| i + 2);
            let many: Vec<u8> =
                (0..10_000).flat_map(|i| format!("x-h{i}: {i}\r\n").into_bytes()).collect();
            head.splice(at..at, many);
            vec![raw(head); 3]
        }
        Hostile::Informational => {
            let mut steps = vec![Step::Write(Bytes::from_static(
                b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n",
            ))];
            steps.extend(recorded.success());
            vec![steps]
        }
        Hostile::Redirect => {
            vec![error(302, &[("location", "http://127.0.0.1:9/elsewhere")]), recorded.success()]
        }
        Hostile::Status599 => vec![error(599, &[]), recorded.success()],
        Hostile::Status999 => vec![error(999, &[]), recorded.success()],
        Hostile::HtmlInsteadOfStream => {
            let page = "<html><body><h1>Sign in to continue</h1></body></html>";
            let mut bytes = raw_head(
                "HTTP/1.1 200 OK",
                &[b"content-type: text/html; charset=utf-8"],
                Some(page.len()),
            );
            bytes.extend_from_slice(page.as_bytes());
            vec![raw(bytes)]
        }
        Hostile::EndlessErrorBody => {
            let head = raw_head(
                "HTTP/1.1 500 Internal Server Error",
                &[b"content-type: application/json"],
                None,
            );
            let endless =
                vec![Step::Endless { prefix: Bytes::from(head), fill: b'e', max: ENDLESS_MAX }];
            vec![endless; 3]
        }
    }
}

/// What the final message must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Content {
    /// Exactly the full response's content.
    Full,
    /// A non-empty prefix of it: what arrived before the fault.
    Partial,
    /// Nothing.
    Empty,
}

/// What every provider must show for a row.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expect {
    /// `done` or an error kind.
    outcome: &'static str,
    requests: usize,
    sleeps: Vec<u64>,
    content: Content,
}

/// How the stream bytes are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writes {
    /// Everything up to the fault in one write.
    Whole,
    /// One write per event.
    PerEvent,
}

impl Writes {
    fn label(self) -> &'static str {
        match self {
            Writes::Whole => "one write",
            Writes::PerEvent => "one write per event",
        }
    }
}

/// Which recorded stream a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    Text,
    Tool,
}

impl Source {
    fn scenario(self) -> &'static str {
        match self {
            Source::Text => "text-only",
            Source::Tool => "tool-call-single",
        }
    }
}

fn status_kind(status: u16) -> &'static str {
    ErrorKind::from_status(status).as_str()
}

impl Fault {
    /// The rows, in grid order.
    fn all() -> Vec<Fault> {
        let mut rows = vec![
            Fault::Refused,
            Fault::ConnectTimeout,
            Fault::ResetBeforeHeaders { exhausted: false },
            Fault::ResetBeforeHeaders { exhausted: true },
            Fault::ResetAfterHeaders,
            Fault::FirstByteTimeout,
            Fault::IdleBeforeContent,
            Fault::ResetMidStream,
            Fault::IdleMidStream,
            Fault::TotalMidStream,
        ];
        let statuses = [
            (408, RetryHeader::None),
            (409, RetryHeader::None),
            (429, RetryHeader::Seconds),
            (429, RetryHeader::Millis),
            (500, RetryHeader::None),
            (502, RetryHeader::None),
            (503, RetryHeader::None),
            (529, RetryHeader::None),
        ];
        for (status, header) in statuses {
            for exhausted in [false, true] {
                rows.push(Fault::Status { status, header, exhausted });
            }
        }
        rows.extend([
            Fault::InvalidUtf8,
            Fault::MalformedJson,
            Fault::Oversize,
            Fault::Truncated,
            Fault::DuplicatedTerminal,
        ]);
        rows.extend(Hostile::ALL.map(Fault::Hostile));
        rows
    }

    fn name(self) -> String {
        let ms = |d: Duration| d.as_millis();
        match self {
            Fault::Refused => "connection refused".to_owned(),
            Fault::ConnectTimeout => format!("connect timeout ({} ms)", ms(SHORT)),
            Fault::ResetBeforeHeaders { exhausted: false } => {
                "reset before headers, then 200".to_owned()
            }
            Fault::ResetBeforeHeaders { exhausted: true } => {
                "reset before headers, every time".to_owned()
            }
            Fault::ResetAfterHeaders => "reset after headers, then 200".to_owned(),
            Fault::FirstByteTimeout => format!("first-byte timeout ({} ms)", ms(SHORT)),
            Fault::IdleBeforeContent => {
                format!("idle timeout before content ({} ms), then 200", ms(SHORT))
            }
            Fault::ResetMidStream => "reset mid-stream".to_owned(),
            Fault::IdleMidStream => format!("stall mid-stream > idle ({} ms)", ms(SHORT)),
            Fault::TotalMidStream => format!("stall mid-stream > total ({} ms)", ms(TOTAL)),
            Fault::Status { status, header, exhausted } => {
                let header = match header {
                    RetryHeader::None => String::new(),
                    RetryHeader::Seconds => " retry-after: 2".to_owned(),
                    RetryHeader::Millis => " retry-after-ms: 1500".to_owned(),
                };
                let then = if exhausted { ", every time" } else { ", then 200" };
                format!("http {status}{header}{then}")
            }
            Fault::InvalidUtf8 => "invalid utf-8 in an event".to_owned(),
            Fault::MalformedJson => "malformed json in an event".to_owned(),
            Fault::Oversize => format!("event > {} MiB (limit)", MAX_EVENT / (1024 * 1024)),
            Fault::Truncated => "truncated stream".to_owned(),
            Fault::DuplicatedTerminal => "duplicated terminal event".to_owned(),
            Fault::Hostile(hostile) => hostile.name().to_owned(),
        }
    }

    /// The delays of retries 1 and 2 with the matrix's policy (500 ms, doubling, no jitter).
    fn delays(self) -> [u64; 2] {
        match self {
            Fault::Status { header: RetryHeader::Seconds, .. } => [2000, 2000],
            Fault::Status { header: RetryHeader::Millis, .. } => [1500, 1500],
            _ => [500, 1000],
        }
    }

    fn expect(self) -> Expect {
        let [d1, d2] = self.delays();
        let retried = |outcome, requests| Expect {
            outcome,
            requests,
            sleeps: vec![d1, d2],
            content: Content::Empty,
        };
        let recovered =
            Expect { outcome: "done", requests: 2, sleeps: vec![d1], content: Content::Full };
        let cut = |outcome| Expect {
            outcome,
            requests: 1,
            sleeps: Vec::new(),
            content: Content::Partial,
        };
        match self {
            Fault::Refused | Fault::ConnectTimeout => retried("transport", 0),
            Fault::ResetBeforeHeaders { exhausted: true } | Fault::FirstByteTimeout => {
                retried("transport", 3)
            }
            Fault::ResetBeforeHeaders { exhausted: false }
            | Fault::ResetAfterHeaders
            | Fault::IdleBeforeContent => recovered,
            Fault::Status { exhausted: false, .. } => recovered,
            Fault::Status { status, exhausted: true, .. } => retried(status_kind(status), 3),
            Fault::ResetMidStream | Fault::IdleMidStream | Fault::TotalMidStream => {
                cut("transport")
            }
            Fault::InvalidUtf8 | Fault::MalformedJson | Fault::Oversize => cut("decode"),
            Fault::Truncated => cut("truncated"),
            Fault::DuplicatedTerminal => {
                Expect { outcome: "done", requests: 1, sleeps: Vec::new(), content: Content::Full }
            }
            Fault::Hostile(hostile) => hostile.expect(),
        }
    }

    /// The recorded streams the row runs on (mid-stream faults use both).
    fn sources(self) -> &'static [Source] {
        match self {
            Fault::ResetMidStream
            | Fault::IdleMidStream
            | Fault::TotalMidStream
            | Fault::InvalidUtf8
            | Fault::MalformedJson
            | Fault::Truncated
            | Fault::DuplicatedTerminal => &[Source::Text, Source::Tool],
            _ => &[Source::Text],
        }
    }

    /// How the bytes are written (faults inside the body are tried both ways).
    fn writes(self) -> &'static [Writes] {
        match self {
            Fault::ResetMidStream
            | Fault::IdleMidStream
            | Fault::InvalidUtf8
            | Fault::MalformedJson
            | Fault::Truncated
            | Fault::DuplicatedTerminal => &[Writes::Whole, Writes::PerEvent],
            _ => &[Writes::Whole],
        }
    }

    fn tweak(self, options: &mut StreamOptions) {
        match self {
            Fault::ConnectTimeout => options.timeouts.connect = Some(SHORT),
            Fault::FirstByteTimeout => options.timeouts.first_byte = Some(SHORT),
            Fault::IdleBeforeContent | Fault::IdleMidStream => options.timeouts.idle = Some(SHORT),
            Fault::TotalMidStream => {
                options.timeouts.idle = None;
                options.timeouts.total = Some(TOTAL);
            }
            Fault::Oversize => options.max_event_bytes = Some(MAX_EVENT),
            _ => {}
        }
    }
}

/// A provider's recorded stream, cut into events.
#[derive(Debug)]
struct Recorded {
    fixture: Box<Fixture>,
    /// The recorded 200 response (its content type says SSE or AWS event stream).
    response: Canned,
    events: Vec<Bytes>,
    /// Mid-stream faults happen after this many events.
    cut: usize,
}

impl Recorded {
    fn load(provider: &str, source: Source, root: &std::path::Path) -> Result<Recorded> {
        let dir = root.join(provider).join(source.scenario());
        let fixture = match fixture::load(&dir)? {
            Scenario::Fixture(f) => f,
            Scenario::Skip(why) => {
                return Err(Error::Msg(format!("{}: declared skip ({why})", dir.display())));
            }
        };
        let response = match &fixture.responses {
            Responses::Always(canned) if canned.status == 200 && canned.is_stream() => {
                canned.clone()
            }
            _ => {
                return Err(Error::Msg(format!(
                    "{}: needs a plain 200 response.sse or response.eventstream (no exchanges.json)",
                    dir.display()
                )));
            }
        };
        let events = split_stream(&response, &response.body);
        if events.len() < 2 {
            return Err(Error::Msg(format!("{}: needs at least two events to cut", dir.display())));
        }
        let cut = (events.len() / 2).max(1);
        Ok(Recorded { fixture, response, events, cut })
    }

    fn head(&self) -> Bytes {
        stream_head(&self.response)
    }

    fn line_end(&self) -> &'static str {
        if self.events.first().is_some_and(|e| e.windows(2).any(|w| w == b"\r\n")) {
            "\r\n"
        } else {
            "\n"
        }
    }

    /// The head and `events` as writes.
    fn body(&self, events: &[Bytes], writes: Writes) -> Vec<Step> {
        match writes {
            Writes::Whole => {
                let joined: Vec<u8> = events.iter().flat_map(|e| e.iter().copied()).collect();
                let mut bytes = self.head().to_vec();
                if !joined.is_empty() {
                    bytes.extend(chunk(&joined));
                }
                vec![Step::Write(Bytes::from(bytes))]
            }
            Writes::PerEvent => std::iter::once(Step::Write(self.head()))
                .chain(events.iter().map(|e| Step::Write(Bytes::from(chunk(e)))))
                .collect(),
        }
    }

    fn prefix(&self) -> &[Bytes] {
        self.events.get(..self.cut).unwrap_or_default()
    }

    fn success(&self) -> Script {
        let mut steps = self.body(&self.events, Writes::Whole);
        steps.push(Step::Write(end_chunks()));
        steps
    }

    /// The event after the cut with its data line changed by `f` (which gets the data
    /// value and returns the replacement bytes).
    /// In an AWS event stream the message's JSON payload is changed and the message
    /// re-encoded with valid CRCs, so the fault reaches the decoder, not the framing.
    fn corrupt(&self, f: impl Fn(&str) -> Vec<u8>) -> Bytes {
        let event = self.events.get(self.cut).cloned().unwrap_or_default();
        if self.response.is_eventstream() {
            let Some((headers, payload)) = llm_testkit::eventstream::parse_message(&event) else {
                return event;
            };
            let bad = f(&String::from_utf8_lossy(&payload));
            return llm_testkit::eventstream::encode_message(&headers, &bad)
                .map_or(event, Bytes::from);
        }
        let text = String::from_utf8_lossy(&event).into_owned();
        let mut out = Vec::new();
        for line in text.split_inclusive('\n') {
            match line.strip_prefix("data:") {
                Some(rest) => {
                    let value = rest.trim_start_matches(' ').trim_end_matches(['\r', '\n']);
                    out.extend_from_slice(b"data: ");
                    out.extend(f(value));
                    out.extend_from_slice(self.line_end().as_bytes());
                }
                None => out.extend_from_slice(line.as_bytes()),
            }
        }
        Bytes::from(out)
    }

    /// The `event:` line of the event after the cut, if it has one.
    fn event_line(&self) -> String {
        let event = self.events.get(self.cut).cloned().unwrap_or_default();
        let text = String::from_utf8_lossy(&event).into_owned();
        text.split_inclusive('\n').find(|l| l.starts_with("event:")).unwrap_or("").to_owned()
    }

    fn scripts(&self, fault: Fault, writes: Writes) -> Vec<Script> {
        let rest = self.events.get(self.cut + 1..).unwrap_or_default();
        let with_fault = |bad: Bytes| {
            let mut events = self.prefix().to_vec();
            events.push(bad);
            events.extend(rest.iter().cloned());
            let mut steps = self.body(&events, writes);
            steps.push(Step::Write(end_chunks()));
            steps
        };
        match fault {
            Fault::Refused | Fault::ConnectTimeout => Vec::new(),
            Fault::ResetBeforeHeaders { exhausted: false } => {
                vec![vec![Step::Reset], self.success()]
            }
            Fault::ResetBeforeHeaders { exhausted: true } => vec![vec![Step::Reset]; 3],
            Fault::ResetAfterHeaders => vec![
                vec![Step::Write(self.head()), Step::Sleep(BEFORE_RESET), Step::Reset],
                self.success(),
            ],
            Fault::FirstByteTimeout => vec![vec![Step::Hold]; 3],
            Fault::IdleBeforeContent => {
                vec![vec![Step::Write(self.head()), Step::Hold], self.success()]
            }
            Fault::ResetMidStream => {
                let mut steps = self.body(self.prefix(), writes);
                steps.push(Step::Sleep(BEFORE_RESET));
                steps.push(Step::Reset);
                vec![steps]
            }
            Fault::IdleMidStream | Fault::TotalMidStream => {
                let mut steps = self.body(self.prefix(), writes);
                steps.push(Step::Hold);
                vec![steps]
            }
            Fault::Status { status, header, exhausted } => {
                let headers: &[(&str, &str)] = match header {
                    RetryHeader::None => &[],
                    RetryHeader::Seconds => &[("retry-after", "2")],
                    RetryHeader::Millis => &[("retry-after-ms", "1500")],
                };
                let error =
                    vec![Step::Write(status_response(status, headers, &fault_body(status)))];
                if exhausted { vec![error; 3] } else { vec![error, self.success()] }
            }
            Fault::InvalidUtf8 => vec![with_fault(self.corrupt(|value| {
                let mid = value.len() / 2;
                let mut at = mid;
                while !value.is_char_boundary(at) {
                    at += 1;
                }
                let mut bytes = value.as_bytes().get(..at).unwrap_or_default().to_vec();
                bytes.extend_from_slice(&[0xC3, 0x28, 0xFF]);
                bytes.extend_from_slice(value.as_bytes().get(at..).unwrap_or_default());
                bytes
            }))],
            Fault::MalformedJson => vec![with_fault(self.corrupt(|value| {
                let mut at = value.len() / 2;
                while !value.is_char_boundary(at) {
                    at += 1;
                }
                let mut bytes = value.as_bytes().get(..at).unwrap_or_default().to_vec();
                bytes.extend_from_slice(b"\"}}{,");
                bytes
            }))],
            Fault::Oversize if self.response.is_eventstream() => {
                // A prelude announcing a message far over the limit, then endless bytes.
                let mut steps = self.body(self.prefix(), writes);
                let total = u32::try_from(ENDLESS_MAX * 2).unwrap_or(u32::MAX);
                let start = llm_testkit::eventstream::prelude(total, 0);
                steps.push(Step::Endless {
                    prefix: Bytes::from(chunk(&start)),
                    fill: b'a',
                    max: ENDLESS_MAX,
                });
                vec![steps]
            }
            Fault::Oversize => {
                let mut steps = self.body(self.prefix(), writes);
                let mut start = self.event_line().into_bytes();
                start.extend_from_slice(b"data: {\"pad\":\"");
                steps.push(Step::Endless {
                    prefix: Bytes::from(chunk(&start)),
                    fill: b'a',
                    max: ENDLESS_MAX,
                });
                vec![steps]
            }
            Fault::Truncated => {
                let mut steps = self.body(self.prefix(), writes);
                steps.push(Step::Write(end_chunks()));
                vec![steps]
            }
            Fault::Hostile(hostile) => hostile_scripts(self, hostile),
            Fault::DuplicatedTerminal => {
                let mut events = self.events.clone();
                if let Some(last) = self.events.last() {
                    events.push(last.clone());
                }
                let mut steps = self.body(&events, writes);
                steps.push(Step::Write(end_chunks()));
                vec![steps]
            }
        }
    }
}

/// What one replay showed.
#[derive(Debug)]
struct Observed {
    events: Vec<AssistantEvent>,
    requests: usize,
    /// Every request had the same request line and body.
    same_requests: bool,
    sleeps: Vec<u64>,
    /// Connections the client had not closed [`CLOSE_GRACE`] after the stream ended.
    open: usize,
    endless_written: u64,
    hung: bool,
    elapsed: Duration,
}

impl Observed {
    /// A run that did not happen.
    fn nothing() -> Observed {
        Observed {
            events: Vec::new(),
            requests: 0,
            same_requests: true,
            sleeps: Vec::new(),
            open: 0,
            endless_written: 0,
            hung: false,
            elapsed: Duration::ZERO,
        }
    }

    fn outcome(&self) -> String {
        match self.events.last() {
            Some(AssistantEvent::Done { .. }) => "done".to_owned(),
            Some(AssistantEvent::Error { error, .. }) => error.kind.as_str().to_owned(),
            Some(_) => "no terminal".to_owned(),
            None => "no events".to_owned(),
        }
    }

    fn message(&self) -> Option<&AssistantMessage> {
        match self.events.last() {
            Some(AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. }) => {
                Some(message)
            }
            _ => None,
        }
    }

    fn summary(&self) -> String {
        let sleeps: Vec<String> = self.sleeps.iter().map(u64::to_string).collect();
        format!("{} {} [{}]", self.outcome(), self.requests, sleeps.join(","))
    }
}

/// Where a run connects.
enum Target {
    Server(Vec<Script>),
    Refused,
    Blackhole,
}

async fn replay(
    entry: ProviderEntry,
    recorded: &Recorded,
    target: Target,
    tweak: impl FnOnce(&mut StreamOptions),
) -> Result<Observed> {
    let (server, addr, _hole, _closed) = match target {
        Target::Server(scripts) => {
            let server = RawServer::start(scripts)
                .await
                .map_err(|e| Error::Msg(format!("cannot start the fault server: {e}")))?;
            let addr = server.addr;
            (Some(server), addr, None, None)
        }
        Target::Refused => {
            let closed = rawserver::closed_port()
                .map_err(|e| Error::Msg(format!("cannot find a closed port: {e}")))?;
            (None, closed.addr, None, Some(closed))
        }
        Target::Blackhole => {
            let hole = rawserver::blackhole()
                .await
                .map_err(|e| Error::Msg(format!("cannot fill a listen queue: {e}")))?
                .ok_or_else(|| {
                    Error::Msg("this system accepts connections beyond the listen backlog: cannot simulate a connect timeout".to_owned())
                })?;
            (None, hole.addr, Some(hole), None)
        }
    };
    Ok(replay_at(entry, recorded, server, addr, tweak).await)
}

async fn replay_at(
    entry: ProviderEntry,
    recorded: &Recorded,
    server: Option<RawServer>,
    addr: SocketAddr,
    tweak: impl FnOnce(&mut StreamOptions),
) -> Observed {
    let fixture = &recorded.fixture;
    let mut model = fixture.model.clone();
    model.base_url = loopback_base_url(&fixture.model.base_url, addr);
    let sleeper = Arc::new(RecordingSleeper::new());
    let mut options = stream_options(&fixture.options, sleeper.clone());
    tweak(&mut options);
    let provider = (entry.make)();
    let started = Instant::now();
    let mut stream = provider.stream(&model, &fixture.context, &options);
    let mut events = Vec::new();
    let collect = async {
        while let Some(event) = stream.next().await {
            events.push(event);
        }
    };
    let hung = tokio::time::timeout(CELL_TIMEOUT, collect).await.is_err();
    let elapsed = started.elapsed();
    drop(stream);
    drop(provider);
    let (requests, open, endless_written) = match &server {
        Some(server) => {
            let open = server.wait_closed(CLOSE_GRACE).await;
            (server.requests(), open, server.endless_written())
        }
        None => (Vec::new(), 0, 0),
    };
    // A retry sends the same request again.
    let same_requests =
        requests.windows(2).all(|w| matches!(w, [a, b] if a.line == b.line && a.body == b.body));
    let requests = requests.len();
    let sleeps = sleeper.delays().iter().map(|d| d.as_millis() as u64).collect();
    Observed { events, requests, same_requests, sleeps, open, endless_written, hung, elapsed }
}

/// Checks that the text and thinking deltas add up to the final message's blocks
/// and that every tool call in it was announced.
pub fn events_agree(events: &[AssistantEvent], message: &AssistantMessage) -> Vec<String> {
    let mut problems = Vec::new();
    let mut text: BTreeMap<usize, String> = BTreeMap::new();
    let mut starts = 0usize;
    for event in events {
        match event {
            AssistantEvent::TextDelta { content_index, delta }
            | AssistantEvent::ThinkingDelta { content_index, delta } => {
                text.entry(*content_index).or_default().push_str(delta)
            }
            AssistantEvent::ToolCallStart { .. } => starts += 1,
            _ => {}
        }
    }
    for (index, block) in message.content.iter().enumerate() {
        let streamed = text.get(&index).map(String::as_str).unwrap_or("");
        let kept = match block {
            AssistantContent::Text(t) => &t.text,
            AssistantContent::Thinking(t) => &t.thinking,
            AssistantContent::ToolCall(_) | AssistantContent::ProviderContent(_) => continue,
        };
        if streamed != kept {
            problems.push(format!(
                "block {index}: the deltas add up to {streamed:?} but the message holds {kept:?}"
            ));
        }
    }
    let calls = message.tool_calls().count();
    if calls != starts {
        problems.push(format!("{starts} toolcall_start events but {calls} calls in the message"));
    }
    problems
}

/// Whether `partial` is a non-empty prefix of `full`'s content: the same blocks in
/// the same order, each equal or cut short (text a prefix, a call with the same id
/// and name and arguments that are a prefix of the final ones), no block extra.
pub fn is_prefix(partial: &AssistantMessage, full: &AssistantMessage) -> Result<(), String> {
    if partial.content.is_empty() {
        return Err("no content was kept".to_owned());
    }
    if partial.content.len() > full.content.len() {
        return Err(format!(
            "{} blocks kept, the full response has {}",
            partial.content.len(),
            full.content.len()
        ));
    }
    for (i, (a, b)) in partial.content.iter().zip(&full.content).enumerate() {
        let ok = match (a, b) {
            _ if a == b => true,
            (AssistantContent::Text(x), AssistantContent::Text(y)) => y.text.starts_with(&x.text),
            (AssistantContent::Thinking(x), AssistantContent::Thinking(y)) => {
                y.thinking.starts_with(&x.thinking)
            }
            (AssistantContent::ToolCall(x), AssistantContent::ToolCall(y)) => {
                x.name == y.name
                    && (x.id == y.id || x.id.is_empty())
                    && json_prefix(&x.arguments, &y.arguments)
            }
            _ => false,
        };
        if !ok {
            return Err(format!(
                "block {i} is {} but the full response has {}",
                short_json(a),
                short_json(b)
            ));
        }
    }
    Ok(())
}

/// Whether `partial` could be what a best-effort parse of a prefix of `full`'s text
/// gives: objects with a subset of the keys, arrays no longer, strings and numbers
/// cut short.
fn json_prefix(partial: &serde_json::Value, full: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (partial, full) {
        (Value::Object(a), Value::Object(b)) => {
            a.iter().all(|(k, v)| b.get(k).is_some_and(|w| json_prefix(v, w)))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() <= b.len() && a.iter().zip(b).all(|(v, w)| json_prefix(v, w))
        }
        (Value::String(a), Value::String(b)) => b.starts_with(a.as_str()),
        (Value::Number(a), Value::Number(b)) => b.to_string().starts_with(&a.to_string()),
        (Value::Null, _) => true,
        (a, b) => a == b,
    }
}

fn short_json(value: &impl serde::Serialize) -> String {
    let text = serde_json::to_string(value).unwrap_or_default();
    if text.len() <= 200 {
        return text;
    }
    let mut cut = 200;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...", text.get(..cut).unwrap_or_default())
}

fn check(expect: &Expect, run: &Observed, baseline: &AssistantMessage) -> Vec<String> {
    let mut problems = Vec::new();
    if run.hung {
        problems.push(format!("no terminal event after {} s: hangs", CELL_TIMEOUT.as_secs()));
    }
    let terminals = run.events.iter().filter(|e| e.is_terminal()).count();
    if terminals != 1 || !run.events.last().is_some_and(AssistantEvent::is_terminal) {
        problems.push(format!("{terminals} terminal events (must be exactly one, last)"));
    }
    let outcome = run.outcome();
    if outcome != expect.outcome {
        let detail = match run.events.last() {
            Some(AssistantEvent::Error { error, .. }) => format!(" ({error})"),
            _ => String::new(),
        };
        problems.push(format!("ended with {outcome}{detail}, expected {}", expect.outcome));
    }
    if run.requests != expect.requests {
        problems.push(format!("{} requests, expected {}", run.requests, expect.requests));
    }
    if !run.same_requests {
        problems.push("a retry sent a different request line or body".to_owned());
    }
    if run.sleeps != expect.sleeps {
        problems.push(format!("backoff delays {:?} ms, expected {:?}", run.sleeps, expect.sleeps));
    }
    if run.open > 0 {
        problems.push(format!(
            "{} connections still open {} s after the stream ended",
            run.open,
            CLOSE_GRACE.as_secs()
        ));
    }
    if let Some(message) = run.message() {
        problems.extend(events_agree(&run.events, message));
        if let Some(AssistantEvent::Error { error, .. }) = run.events.last()
            && message.error_type.as_deref() != Some(error.kind.as_str())
        {
            problems.push(format!(
                "message.errorType is {:?}, the error kind {}",
                message.error_type, error.kind
            ));
        }
        match expect.content {
            Content::Full if message.content != baseline.content => problems.push(format!(
                "content differs from the full response: {} vs {}",
                short_json(&message.content),
                short_json(&baseline.content)
            )),
            Content::Full => {}
            Content::Empty if !message.content.is_empty() => problems
                .push(format!("content must be empty, got {}", short_json(&message.content))),
            Content::Empty => {}
            Content::Partial => {
                if let Err(why) = is_prefix(message, baseline) {
                    problems.push(format!("partial content not kept: {why}"));
                }
            }
        }
    }
    problems
}

/// One grid cell.
#[derive(Debug, Clone)]
pub struct FaultCell {
    /// Provider folder name.
    pub provider: String,
    /// Row name.
    pub row: String,
    /// `outcome requests [delays]`, from the first run of the cell.
    pub summary: String,
    /// What failed (empty: pass).
    pub problems: Vec<String>,
}

/// The matrix.
#[derive(Debug, Clone)]
pub struct FaultReport {
    /// Columns.
    pub providers: Vec<String>,
    /// Rows.
    pub rows: Vec<String>,
    /// Every cell, row by row.
    pub cells: Vec<FaultCell>,
    /// Extra lines (what the oversize row read, and so on).
    pub notes: Vec<String>,
}

impl FaultReport {
    /// Cells with problems.
    pub fn failed(&self) -> usize {
        self.cells.iter().filter(|c| !c.problems.is_empty()).count()
    }

    /// The cell for `provider` and `row`.
    pub fn cell(&self, provider: &str, row: &str) -> Option<&FaultCell> {
        self.cells.iter().find(|c| c.provider == provider && c.row == row)
    }

    /// The grid (`outcome requests [delays]` per cell, `FAIL` marked), then the failures.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let label = self.rows.iter().map(String::len).chain(["fault".len()]).max().unwrap_or(5);
        let widths: Vec<usize> = self
            .providers
            .iter()
            .map(|p| {
                self.cells
                    .iter()
                    .filter(|c| &c.provider == p)
                    .map(|c| c.summary.len() + if c.problems.is_empty() { 0 } else { 5 })
                    .chain([p.len()])
                    .max()
                    .unwrap_or(p.len())
            })
            .collect();
        let mut line = format!("{:<label$}", "fault");
        for (p, w) in self.providers.iter().zip(&widths) {
            let _ = write!(line, "  {p:<w$}");
        }
        out.push_str(line.trim_end());
        out.push('\n');
        for row in &self.rows {
            let mut line = format!("{row:<label$}");
            for (p, w) in self.providers.iter().zip(&widths) {
                let text = match self.cell(p, row) {
                    Some(c) if c.problems.is_empty() => c.summary.clone(),
                    Some(c) => format!("FAIL {}", c.summary),
                    None => "-".to_owned(),
                };
                let _ = write!(line, "  {text:<w$}");
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        let failures: Vec<&FaultCell> =
            self.cells.iter().filter(|c| !c.problems.is_empty()).collect();
        if !failures.is_empty() {
            out.push_str("\nfailures:\n");
            for cell in failures {
                let _ = writeln!(out, "FAIL {} / {}", cell.provider, cell.row);
                for p in &cell.problems {
                    for line in p.lines() {
                        let _ = writeln!(out, "    {line}");
                    }
                }
            }
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for note in &self.notes {
                let _ = writeln!(out, "{note}");
            }
        }
        let _ = writeln!(
            out,
            "\nfault matrix: {} cells, {} passed, {} failed",
            self.cells.len(),
            self.cells.len() - self.failed(),
            self.failed()
        );
        out
    }
}

/// What to run (xtask's cancellation sweep and secret scan share it).
#[derive(Debug, Clone)]
pub struct Options {
    /// The `fixtures/` folder.
    pub fixtures_root: PathBuf,
    /// Only this provider.
    pub provider: Option<String>,
    /// The provider table.
    pub providers: Vec<ProviderEntry>,
}

impl Options {
    /// Every provider of `providers`, with the fixtures of `fixtures_root`.
    pub fn new(fixtures_root: impl Into<PathBuf>, providers: Vec<ProviderEntry>) -> Self {
        Options { fixtures_root: fixtures_root.into(), provider: None, providers }
    }

    /// The providers to run: the table, or its entry named [`Options::provider`]
    /// (an unknown name is an error that lists the known ones).
    pub fn selected(&self) -> Result<Vec<ProviderEntry>> {
        let list: Vec<ProviderEntry> = self
            .providers
            .iter()
            .filter(|p| self.provider.as_deref().is_none_or(|only| only == p.name))
            .copied()
            .collect();
        if list.is_empty() {
            let known: Vec<&str> = self.providers.iter().map(|p| p.name).collect();
            return Err(Error::Msg(format!(
                "unknown provider `{}` (known: {})",
                self.provider.as_deref().unwrap_or(""),
                known.join(", ")
            )));
        }
        Ok(list)
    }
}

/// One provider's recorded streams and their fault-free results.
struct Base {
    entry: ProviderEntry,
    streams: BTreeMap<Source, (Arc<Recorded>, AssistantMessage)>,
}

/// Loads a provider's streams and replays them without faults.
async fn base(entry: ProviderEntry, root: &std::path::Path) -> Result<Base, String> {
    let mut streams = BTreeMap::new();
    for source in [Source::Text, Source::Tool] {
        // A provider without tools has no tool-call fixture: its rows run on text only.
        if source == Source::Tool && !root.join(entry.name).join(source.scenario()).is_dir() {
            continue;
        }
        let recorded = Recorded::load(entry.name, source, root).map_err(|e| e.to_string())?;
        let server = RawServer::start(vec![recorded.success()])
            .await
            .map_err(|e| format!("cannot start the fault server: {e}"))?;
        let addr = server.addr;
        let run = replay_at(entry, &recorded, Some(server), addr, |_| {}).await;
        let message = match run.events.last() {
            Some(AssistantEvent::Done { message, .. }) => message.clone(),
            _ => {
                return Err(format!(
                    "{} replayed without faults ends with {}, not done",
                    source.scenario(),
                    run.outcome()
                ));
            }
        };
        streams.insert(source, (Arc::new(recorded), *message));
    }
    Ok(Base { entry, streams })
}

struct Job {
    provider: &'static str,
    fault: Fault,
    source: Source,
    writes: Writes,
    entry: ProviderEntry,
    recorded: Arc<Recorded>,
    baseline: AssistantMessage,
}

struct JobResult {
    provider: &'static str,
    fault: Fault,
    source: Source,
    writes: Writes,
    run: Observed,
    problems: Vec<String>,
}

async fn run_job(job: Job) -> JobResult {
    let fault = job.fault;
    let target = match fault {
        Fault::Refused => Target::Refused,
        Fault::ConnectTimeout => Target::Blackhole,
        _ => Target::Server(job.recorded.scripts(fault, job.writes)),
    };
    let (run, mut problems) =
        match replay(job.entry, &job.recorded, target, |o| fault.tweak(o)).await {
            Ok(run) => {
                let problems = check(&fault.expect(), &run, &job.baseline);
                (run, problems)
            }
            Err(e) => (Observed::nothing(), vec![e.to_string()]),
        };
    if fault == Fault::Oversize && run.endless_written as usize >= ENDLESS_MAX {
        problems.push(format!(
            "the client read the whole {} MiB event: the size limit did not stop it",
            ENDLESS_MAX / (1024 * 1024)
        ));
    }
    // Three attempts read at most the error-body limit each (plus what was in flight).
    if fault == Fault::Hostile(Hostile::EndlessErrorBody)
        && run.endless_written as usize > 3 * ENDLESS_ERROR_READ
    {
        problems.push(format!(
            "the server wrote {} MiB of error bodies: the error-body limit did not stop the reads",
            run.endless_written / (1024 * 1024)
        ));
    }
    JobResult {
        provider: job.provider,
        fault,
        source: job.source,
        writes: job.writes,
        run,
        problems,
    }
}

/// Runs the matrix.
pub fn run(options: &Options) -> Result<FaultReport> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Msg(format!("cannot start the tokio runtime: {e}")))?;
    runtime.block_on(run_async(options))
}

async fn run_async(options: &Options) -> Result<FaultReport> {
    let entries = options.selected()?;
    let faults = Fault::all();
    let rows: Vec<String> = faults.iter().map(|f| f.name()).collect();
    let mut cells: Vec<FaultCell> = Vec::new();
    let mut jobs = Vec::new();
    let mut broken: BTreeMap<&str, String> = BTreeMap::new();
    // A provider with no recorded text stream yet has nothing to build faults from:
    // its cells are skips (tidy fails a provider whose every scenario is skipped).
    let mut skipped: BTreeMap<&str, String> = BTreeMap::new();
    for entry in &entries {
        let text = options.fixtures_root.join(entry.name).join(Source::Text.scenario());
        if !text.is_dir() {
            skipped.insert(entry.name, format!("no fixtures/{}/text-only yet", entry.name));
            continue;
        }
        match base(*entry, &options.fixtures_root).await {
            Ok(base) => {
                for &fault in &faults {
                    for &source in fault.sources() {
                        let Some((recorded, baseline)) = base.streams.get(&source) else {
                            continue;
                        };
                        for &writes in fault.writes() {
                            jobs.push(Job {
                                provider: entry.name,
                                fault,
                                source,
                                writes,
                                entry: base.entry,
                                recorded: recorded.clone(),
                                baseline: baseline.clone(),
                            });
                        }
                    }
                }
            }
            Err(why) => {
                broken.insert(entry.name, why);
            }
        }
    }
    let results: Vec<JobResult> = futures_util::stream::iter(jobs.into_iter().map(|job| {
        let (provider, fault, source, writes) = (job.provider, job.fault, job.source, job.writes);
        async move {
            match tokio::spawn(run_job(job)).await {
                Ok(result) => result,
                Err(e) => JobResult {
                    provider,
                    fault,
                    source,
                    writes,
                    run: Observed::nothing(),
                    problems: vec![format!("the replay panicked: {e}")],
                },
            }
        }
    }))
    .buffer_unordered(PARALLEL)
    .collect()
    .await;

    // Every mid-stream fault at the same point keeps the same content, however the
    // bytes were written: a run that keeps something else than most fails.
    let mut results = results;
    let content_of = |r: &JobResult| {
        r.run.message().map(|m| serde_json::to_string(&m.content).unwrap_or_default())
    };
    let mut counts: BTreeMap<(&str, Source), BTreeMap<String, usize>> = BTreeMap::new();
    for r in &results {
        if r.fault.expect().content == Content::Partial
            && let Some(content) = content_of(r)
        {
            *counts.entry((r.provider, r.source)).or_default().entry(content).or_default() += 1;
        }
    }
    for r in &mut results {
        if r.fault.expect().content != Content::Partial {
            continue;
        }
        let Some(content) = content_of(r) else { continue };
        let Some(majority) = counts
            .get(&(r.provider, r.source))
            .and_then(|c| c.iter().max_by_key(|(_, n)| **n))
            .map(|(c, _)| c.clone())
        else {
            continue;
        };
        if content != majority {
            r.problems.push(format!(
                "kept {} before the fault, but most faults at the same point keep {}",
                short_json(&content),
                short_json(&majority)
            ));
        }
    }
    let mut notes = Vec::new();

    for (fault, row) in faults.iter().zip(&rows) {
        for entry in &entries {
            let mut cell = FaultCell {
                provider: entry.name.to_owned(),
                row: row.clone(),
                summary: String::new(),
                problems: Vec::new(),
            };
            if let Some(why) = skipped.get(entry.name) {
                cell.summary = format!("skip: {why}");
                cells.push(cell);
                continue;
            }
            if let Some(why) = broken.get(entry.name) {
                cell.summary = "-".to_owned();
                cell.problems.push(format!("cannot build the matrix: {why}"));
                cells.push(cell);
                continue;
            }
            let mut mine: Vec<&JobResult> =
                results.iter().filter(|r| r.provider == entry.name && r.fault == *fault).collect();
            mine.sort_by_key(|r| (r.source, r.writes == Writes::PerEvent));
            match mine.first() {
                Some(first) => cell.summary = first.run.summary(),
                None => {
                    cell.summary = "-".to_owned();
                    cell.problems.push("no replay ran".to_owned());
                }
            }
            for r in &mine {
                for p in &r.problems {
                    cell.problems.push(format!(
                        "{} ({}): {p}",
                        r.source.scenario(),
                        r.writes.label()
                    ));
                }
                if r.fault == Fault::Hostile(Hostile::EndlessErrorBody) {
                    notes.push(format!(
                        "{}: the endless error bodies of 3 attempts were cut after the server wrote {:.1} MiB",
                        entry.name,
                        r.run.endless_written as f64 / (1024.0 * 1024.0),
                    ));
                }
                if r.fault == Fault::Oversize {
                    notes.push(format!(
                        "{}: the endless event was cut after the server wrote {:.1} MiB ({} ms)",
                        entry.name,
                        r.run.endless_written as f64 / (1024.0 * 1024.0),
                        r.run.elapsed.as_millis()
                    ));
                }
            }
            cells.push(cell);
        }
    }
    Ok(FaultReport {
        providers: entries.iter().map(|e| e.name.to_owned()).collect(),
        rows,
        cells,
        notes,
    })
}
