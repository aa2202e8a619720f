#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use hmac::{KeyInit, Mac};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::*;

// Obviously fake credentials (AWS's documentation example key and made-up values).
const KEY_ID: &str = "AKIDEXAMPLE";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const TOKEN: &str = "FAKE-session-token-EXAMPLE/abc+def==";
const BEARER: &str = "test-bedrock-api-key-EXAMPLE";

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("clawcall-bedrock-auth-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fake environment: the variables given, and a HOME with no `.aws` unless given.
struct Env {
    vars: HashMap<String, String>,
    _scratch: Scratch,
}

impl Env {
    fn new(vars: &[(&str, &str)]) -> Env {
        Env::with_files(vars, None, None)
    }

    /// `config` / `credentials` become the shared files (through `AWS_CONFIG_FILE` and
    /// `AWS_SHARED_CREDENTIALS_FILE`); without them no file exists.
    fn with_files(vars: &[(&str, &str)], config: Option<&str>, credentials: Option<&str>) -> Env {
        let scratch = Scratch::new();
        let mut map: HashMap<String, String> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        map.entry("HOME".into()).or_insert_with(|| scratch.0.join("home").display().to_string());
        if let Some(text) = config {
            map.insert("AWS_CONFIG_FILE".into(), scratch.write("config", text));
        }
        if let Some(text) = credentials {
            map.insert("AWS_SHARED_CREDENTIALS_FILE".into(), scratch.write("credentials", text));
        }
        Env { vars: map, _scratch: scratch }
    }

    fn get(&self) -> impl Fn(&str) -> Option<String> + '_ {
        |name: &str| self.vars.get(name).cloned()
    }
}

fn options() -> StreamOptions {
    StreamOptions::default()
}

fn with_option(key: &str, value: &str) -> StreamOptions {
    let mut o = options();
    o.provider_options.insert(key.to_owned(), json!(value));
    o
}

fn auth(options: &StreamOptions, env: &Env) -> Result<Auth, Error> {
    resolve_auth(options, &env.get())
}

fn sigv4(auth: Result<Auth, Error>) -> (AwsCredentials, String) {
    match auth {
        Ok(Auth::SigV4 { credentials, region }) => (credentials, region),
        other => panic!("not SigV4: {other:?}"),
    }
}

const ENV_KEYS: [(&str, &str); 2] =
    [("AWS_ACCESS_KEY_ID", "AKIDENVEXAMPLE"), ("AWS_SECRET_ACCESS_KEY", "env-secret-EXAMPLE")];

const PROFILES: &str = "\
[default]
aws_access_key_id = AKIDDEFAULTEXAMPLE
aws_secret_access_key = default-secret-EXAMPLE
region = eu-central-1

[profile prod]
aws_access_key_id = AKIDPRODEXAMPLE
aws_secret_access_key = prod-secret-EXAMPLE
aws_session_token = prod-token-EXAMPLE
region = ap-south-1
";

// ---------------------------------------------------------------------------------------------
// Precedence
// ---------------------------------------------------------------------------------------------

#[test]
fn bearer_from_the_options_key_wins_over_the_environment() {
    let env = Env::new(&[(BEARER_TOKEN_ENV, "env-bearer-EXAMPLE"), ENV_KEYS[0], ENV_KEYS[1]]);
    let mut o = options();
    o.api_key = Some(ApiKey::new(BEARER));
    assert_eq!(auth(&o, &env).unwrap(), Auth::Bearer(ApiKey::new(BEARER)));
    // An empty key counts as absent: the environment's token is next.
    o.api_key = Some(ApiKey::new(""));
    assert_eq!(auth(&o, &env).unwrap(), Auth::Bearer(ApiKey::new("env-bearer-EXAMPLE")));
}

#[test]
fn an_empty_bearer_variable_counts_as_absent() {
    let env = Env::new(&[(BEARER_TOKEN_ENV, ""), ENV_KEYS[0], ENV_KEYS[1]]);
    let (credentials, region) = sigv4(auth(&options(), &env));
    assert_eq!(credentials.source(), &CredentialSource::Environment);
    assert_eq!(credentials.access_key_id(), "AKIDENVEXAMPLE");
    assert_eq!(region, DEFAULT_REGION);
}

#[test]
fn skip_auth_signs_with_dummy_keys_even_with_a_bearer_token() {
    for vars in [
        vec![(SKIP_AUTH_ENV, "1"), (BEARER_TOKEN_ENV, "env-bearer-EXAMPLE")],
        vec![(SKIP_AUTH_ENV, "1"), ENV_KEYS[0], ENV_KEYS[1]],
        vec![(SKIP_AUTH_ENV, "1"), ("AWS_REGION", "eu-west-1")],
    ] {
        let env = Env::new(&vars);
        let (credentials, region) = sigv4(auth(&options(), &env));
        assert_eq!(credentials.source(), &CredentialSource::SkipAuth, "{vars:?}");
        assert_eq!(credentials.access_key_id(), "dummy-access-key");
        assert_eq!(credentials.secret_access_key.expose(), "dummy-secret-key");
        assert!(!credentials.has_session_token());
        let expected =
            if vars.contains(&("AWS_REGION", "eu-west-1")) { "eu-west-1" } else { DEFAULT_REGION };
        assert_eq!(region, expected);
    }
    // Only "1" skips.
    let env = Env::new(&[(SKIP_AUTH_ENV, "true"), (BEARER_TOKEN_ENV, "env-bearer-EXAMPLE")]);
    assert!(matches!(auth(&options(), &env).unwrap(), Auth::Bearer(_)));
}

#[test]
fn environment_keys_with_a_session_token() {
    let env = Env::new(&[
        ENV_KEYS[0],
        ENV_KEYS[1],
        ("AWS_SESSION_TOKEN", TOKEN),
        ("AWS_REGION", "us-west-2"),
    ]);
    let (credentials, region) = sigv4(auth(&options(), &env));
    assert_eq!(credentials.source(), &CredentialSource::Environment);
    assert_eq!(credentials.secret_access_key.expose(), "env-secret-EXAMPLE");
    assert_eq!(credentials.session_token.as_ref().map(ApiKey::expose), Some(TOKEN));
    assert_eq!(region, "us-west-2");
}

#[test]
fn a_selected_profile_skips_the_environment_keys() {
    let env =
        Env::with_files(&[ENV_KEYS[0], ENV_KEYS[1], ("AWS_PROFILE", "prod")], Some(PROFILES), None);
    let (credentials, region) = sigv4(auth(&options(), &env));
    assert_eq!(credentials.source(), &CredentialSource::Profile("prod".into()));
    assert_eq!(credentials.access_key_id(), "AKIDPRODEXAMPLE");
    assert_eq!(credentials.secret_access_key.expose(), "prod-secret-EXAMPLE");
    assert_eq!(credentials.session_token.as_ref().map(ApiKey::expose), Some("prod-token-EXAMPLE"));
    assert_eq!(region, "ap-south-1", "the profile's region");
    // The option wins over AWS_PROFILE.
    let env =
        Env::with_files(&[ENV_KEYS[0], ENV_KEYS[1], ("AWS_PROFILE", "nope")], Some(PROFILES), None);
    let (credentials, _) = sigv4(auth(&with_option(PROFILE_OPTION, "prod"), &env));
    assert_eq!(credentials.source(), &CredentialSource::Profile("prod".into()));
}

#[test]
fn without_environment_keys_the_default_profile_is_used() {
    // One key alone is not enough.
    let env = Env::with_files(&[ENV_KEYS[0]], Some(PROFILES), None);
    let (credentials, region) = sigv4(auth(&options(), &env));
    assert_eq!(credentials.source(), &CredentialSource::Profile("default".into()));
    assert_eq!(credentials.access_key_id(), "AKIDDEFAULTEXAMPLE");
    // No profile selected: OpenClaw signs for us-east-1, not the default profile's region.
    assert_eq!(region, DEFAULT_REGION);
}

#[test]
fn the_credentials_file_wins_key_by_key_over_the_config_file() {
    let config = "[profile p]\naws_access_key_id = AKIDCONFIGEXAMPLE\naws_secret_access_key = config-secret-EXAMPLE\n";
    let credentials = "[p]\naws_secret_access_key = credentials-secret-EXAMPLE\n";
    let env = Env::with_files(&[("AWS_PROFILE", "p")], Some(config), Some(credentials));
    let (c, _) = sigv4(auth(&options(), &env));
    assert_eq!(c.access_key_id(), "AKIDCONFIGEXAMPLE");
    assert_eq!(c.secret_access_key.expose(), "credentials-secret-EXAMPLE");
}

#[test]
fn the_default_files_are_under_home_and_tilde_paths_expand() {
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.0.join(".aws")).unwrap();
    scratch.write(
        ".aws/credentials",
        "[default]\naws_access_key_id=AKIDHOMEEXAMPLE\naws_secret_access_key=home-secret-EXAMPLE\n",
    );
    scratch.write(
        "other-config",
        "[profile x]\naws_access_key_id=AKIDXEXAMPLE\naws_secret_access_key=x-secret-EXAMPLE\n",
    );
    let home = scratch.0.display().to_string();
    let env = |vars: &[(&str, &str)]| {
        let map: HashMap<String, String> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name: &str| map.get(name).cloned()
    };
    let (c, _) = sigv4(resolve_auth(&options(), &env(&[("HOME", &home)])));
    assert_eq!(c.access_key_id(), "AKIDHOMEEXAMPLE");
    let (c, _) = sigv4(resolve_auth(
        &options(),
        &env(&[("HOME", &home), ("AWS_CONFIG_FILE", "~/other-config"), ("AWS_PROFILE", "x")]),
    ));
    assert_eq!(c.access_key_id(), "AKIDXEXAMPLE");
}

#[test]
fn no_credentials_anywhere_is_an_auth_error_naming_every_source() {
    let env = Env::new(&[
        ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
        ("AWS_SECRET_ACCESS_KEY", "lonely-secret-EXAMPLE"),
    ]);
    let error = auth(&options(), &env).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Auth);
    assert!(!error.retryable);
    let text = error.to_string();
    let mut parts = vec![
        "AWS_SECRET_ACCESS_KEY is set, AWS_ACCESS_KEY_ID is not",
        "profile `default` (not found in",
        "no such file",
        BEARER_TOKEN_ENV,
    ];
    if cfg!(not(feature = "aws-config")) {
        parts.push("web identity credentials (AWS_WEB_IDENTITY_TOKEN_FILE is set: not supported)");
    }
    for part in parts {
        assert!(text.contains(part), "missing {part:?} in {text}");
    }
    assert!(!text.contains("lonely-secret"), "{text}");
}

#[test]
fn unsupported_profiles_are_errors_that_say_why() {
    let cases = [
        (
            "role_arn = arn:aws:iam::123456789012:role/x\nsource_profile = default",
            "assume-role through `role_arn`",
        ),
        ("sso_session = corp\nsso_account_id = 123456789012", "SSO through `sso_session`"),
        ("sso_start_url = https://example.awsapps.com/start", "SSO through `sso_start_url`"),
        ("credential_process = /bin/creds", "credential_process through `credential_process`"),
        ("web_identity_token_file = /tmp/t", "web identity through `web_identity_token_file`"),
        ("region = us-west-2", "no aws_access_key_id and aws_secret_access_key"),
    ];
    for (body, expected) in cases {
        // A secret next to an assume-role setting is not used, and never echoed.
        let config =
            format!("[profile p]\n{body}\naws_secret_access_key = hidden-secret-EXAMPLE\n");
        let env = Env::with_files(&[("AWS_PROFILE", "p")], Some(&config), None);
        let error = auth(&options(), &env).unwrap_err();
        let text = error.to_string();
        assert_eq!(error.kind, ErrorKind::Auth, "{text}");
        assert!(text.contains(expected), "{body}: {text}");
        assert!(text.contains("profile `p`"), "{text}");
        assert!(!text.contains("hidden-secret"), "{text}");
    }
}

// ---------------------------------------------------------------------------------------------
// Region
// ---------------------------------------------------------------------------------------------

#[test]
fn region_precedence() {
    let all = [("AWS_REGION", "eu-west-1"), ("AWS_DEFAULT_REGION", "ap-south-1")];
    let env = Env::new(&all);
    assert_eq!(resolve_region(&with_option(REGION_OPTION, "us-west-2"), &env.get()), "us-west-2");
    assert_eq!(resolve_region(&options(), &env.get()), "eu-west-1");
    assert_eq!(resolve_region(&with_option(REGION_OPTION, ""), &env.get()), "eu-west-1");
    let env = Env::new(&[("AWS_REGION", ""), all[1]]);
    assert_eq!(resolve_region(&options(), &env.get()), "ap-south-1");
    assert_eq!(configured_region(&options(), &Env::new(&[]).get()), None);
    assert_eq!(resolve_region(&options(), &Env::new(&[]).get()), DEFAULT_REGION);
    // A configured region wins over the profile's.
    let env = Env::with_files(&[("AWS_PROFILE", "prod"), all[0]], Some(PROFILES), None);
    assert_eq!(resolve_region(&options(), &env.get()), "eu-west-1");
    // A profile without a region, or a missing profile: the default.
    let env = Env::with_files(&[("AWS_PROFILE", "none")], Some(PROFILES), None);
    assert_eq!(resolve_region(&options(), &env.get()), DEFAULT_REGION);
    assert_eq!(selected_profile(&options(), &env.get()).as_deref(), Some("none"));
    // The credentials file's region is the fallback.
    let env = Env::with_files(&[("AWS_PROFILE", "c")], None, Some("[c]\nregion = sa-east-1\n"));
    assert_eq!(resolve_region(&options(), &env.get()), "sa-east-1");
}

// ---------------------------------------------------------------------------------------------
// The shared-file dialect
// ---------------------------------------------------------------------------------------------

#[test]
fn parses_the_aws_shared_file_dialect() {
    let text = "\
# a comment
; another
top = ignored before any section
[default]
region=us-west-2 # trailing comment
aws_access_key_id = AKID#NOTACOMMENT
[profile 'quoted-name']
s3 =
  max_concurrent_requests = 20
  region = inner
output = json
[profile \"dq@x.y\"]
k = v
[unknown-prefix name]
k = hidden
[sso-session corp]
sso_region = us-east-1
[plain]
 = no key
k = 1
k = 2
";
    let sections = parse_ini(text);
    let get = |s: &str, k: &str| sections.get(s).and_then(|m| m.get(k)).map(String::as_str);
    assert_eq!(get("default", "region"), Some("us-west-2"));
    assert_eq!(get("default", "aws_access_key_id"), Some("AKID#NOTACOMMENT"));
    assert_eq!(get("profile.quoted-name", "s3.max_concurrent_requests"), Some("20"));
    assert_eq!(get("profile.quoted-name", "s3.region"), Some("inner"));
    assert_eq!(get("profile.quoted-name", "region"), None, "a sub-property stays nested");
    assert_eq!(get("profile.quoted-name", "output"), Some("json"));
    assert_eq!(get("profile.dq@x.y", "k"), Some("v"));
    assert!(!sections.keys().any(|s| s.contains("unknown")), "{sections:?}");
    assert_eq!(get("sso-session.corp", "sso_region"), Some("us-east-1"));
    assert_eq!(get("plain", "k"), Some("2"));
    assert_eq!(sections.get("plain").map(BTreeMap::len), Some(1));
    let config = profiles(&sections, true);
    assert_eq!(config.keys().collect::<Vec<_>>(), ["default", "dq@x.y", "quoted-name"]);
    // `[profile default]` wins over `[default]` in the config file; in the credentials file
    // a section is a profile as named.
    let both = parse_ini("[default]\nregion = a\n[profile default]\nregion = b\n");
    assert_eq!(profiles(&both, true)["default"]["region"], "b");
    assert!(profiles(&both, false).contains_key("profile.default"));
}

// ---------------------------------------------------------------------------------------------
// Applying: bearer and SigV4
// ---------------------------------------------------------------------------------------------

/// 2015-08-30T12:36:00Z, the date of AWS's SigV4 test suite.
fn signing_time() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_440_938_160)
}

const ARN_URL: &str = "https://bedrock-runtime.us-west-2.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Aapplication-inference-profile%2Fabc123/converse-stream";

fn request(url: &str) -> HttpRequest {
    HttpRequest {
        method: reqwest::Method::POST,
        url: url.to_owned(),
        headers: llm_http::header_map(
            "test",
            [
                ("content-type", "application/json"),
                ("Authorization", "stale"),
                ("X-Custom", "first"),
                ("x-custom", "  last   value "),
            ],
        )
        .unwrap(),
        body: bytes::Bytes::from_static(
            br#"{"messages":[{"role":"user","content":[{"text":"Hi"}]}]}"#,
        ),
    }
}

fn header<'a>(request: &'a HttpRequest, name: &str) -> Vec<&'a str> {
    request.headers.get_all(name).iter().map(|v| v.to_str().unwrap()).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// AWS's documented signing-key derivation.
fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> Vec<u8> {
    let k = hmac(format!("AWS4{secret}").as_bytes(), date);
    let k = hmac(&k, region);
    let k = hmac(&k, service);
    hmac(&k, "aws4_request")
}

/// Percent-encodes every byte but RFC 3986 unreserved characters and `/`.
fn uri_encode_path(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The `Authorization` header by AWS's documented SigV4 algorithm, written from the
/// documentation (not from aws-sigv4): canonical request, string to sign, derived key.
fn expected_authorization(
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    token: Option<&str>,
    region: &str,
) -> (String, String) {
    let (date, amz_date) = ("20150830", "20150830T123600Z");
    let payload_hash = hex(&Sha256::digest(body));
    let mut canonical: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| (n.to_lowercase(), v.split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect();
    canonical.push(("host".into(), host.into()));
    canonical.push(("x-amz-content-sha256".into(), payload_hash.clone()));
    canonical.push(("x-amz-date".into(), amz_date.into()));
    if let Some(token) = token {
        canonical.push(("x-amz-security-token".into(), token.into()));
    }
    canonical.sort();
    let canonical_headers: String = canonical.iter().map(|(n, v)| format!("{n}:{v}\n")).collect();
    let signed_headers = canonical.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(";");
    // Non-S3 services: the already-encoded path is encoded once more.
    let canonical_request = format!(
        "{method}\n{}\n\n{canonical_headers}\n{signed_headers}\n{payload_hash}",
        uri_encode_path(path)
    );
    let scope = format!("{date}/{region}/bedrock/aws4_request");
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex(&Sha256::digest(canonical_request.as_bytes()))
    );
    let signature = hex(&hmac(&signing_key(SECRET, date, region, "bedrock"), &string_to_sign));
    (
        format!(
            "AWS4-HMAC-SHA256 Credential={KEY_ID}/{scope}, SignedHeaders={signed_headers}, Signature={signature}"
        ),
        canonical_request,
    )
}

#[test]
fn the_oracle_derives_aws_documented_signing_key() {
    // AWS's "derive a signing key" example (secret above, 20120215, us-east-1, iam).
    assert_eq!(
        hex(&signing_key(SECRET, "20120215", "us-east-1", "iam")),
        "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"
    );
}

#[test]
fn sigv4_matches_the_documented_algorithm_with_a_session_token_and_an_arn_path() {
    let auth = Auth::SigV4 {
        credentials: AwsCredentials::new(KEY_ID, SECRET, Some(TOKEN.to_owned())),
        region: "us-west-2".into(),
    };
    let mut r = request(ARN_URL);
    apply(&auth, &mut r, signing_time()).unwrap();
    let path = ARN_URL.strip_prefix("https://bedrock-runtime.us-west-2.amazonaws.com").unwrap();
    let (expected, canonical_request) = expected_authorization(
        "POST",
        "bedrock-runtime.us-west-2.amazonaws.com",
        path,
        &[("content-type", "application/json"), ("x-custom", "  last   value ")],
        &r.body,
        Some(TOKEN),
        "us-west-2",
    );
    assert!(canonical_request.contains("%253Aaws%253Abedrock"), "{canonical_request}");
    assert!(canonical_request.contains("application-inference-profile%252Fabc123"));
    assert_eq!(header(&r, "authorization"), [expected.as_str()]);
    assert_eq!(header(&r, "x-amz-date"), ["20150830T123600Z"]);
    assert_eq!(header(&r, "x-amz-security-token"), [TOKEN]);
    assert_eq!(header(&r, "x-amz-content-sha256"), [hex(&Sha256::digest(&r.body)).as_str()]);
    // The request's own headers are unchanged (a name set twice keeps its last value, the one
    // sent and signed), the stale authorization is gone.
    assert_eq!(header(&r, "x-custom"), ["  last   value "]);
    assert_eq!(r.url, ARN_URL);
}

#[test]
fn sigv4_without_a_token_and_with_a_port() {
    let auth = Auth::SigV4 {
        credentials: AwsCredentials::new(KEY_ID, SECRET, None),
        region: "eu-west-1".into(),
    };
    let url = "http://127.0.0.1:8123/prefix/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream";
    let mut r = request(url);
    r.headers = llm_http::header_map("test", [("content-type", "application/json")]).unwrap();
    apply(&auth, &mut r, signing_time()).unwrap();
    let (expected, _) = expected_authorization(
        "POST",
        "127.0.0.1:8123",
        "/prefix/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream",
        &[("content-type", "application/json")],
        &r.body,
        None,
        "eu-west-1",
    );
    assert_eq!(header(&r, "authorization"), [expected.as_str()]);
    assert!(header(&r, "x-amz-security-token").is_empty());
    // Signing again replaces the headers instead of adding a second set.
    apply(&auth, &mut r, signing_time()).unwrap();
    assert_eq!(header(&r, "authorization"), [expected.as_str()]);
    assert_eq!(header(&r, "x-amz-date").len(), 1);
    assert_eq!(header(&r, "x-amz-content-sha256").len(), 1);
}

/// The control plane's `GetInferenceProfile` is a `GET` with no body: the method and the
/// empty payload's hash are signed.
#[test]
fn sigv4_signs_the_method_of_a_get_without_a_body() {
    let auth = Auth::SigV4 {
        credentials: AwsCredentials::new(KEY_ID, SECRET, None),
        region: "us-west-2".into(),
    };
    let path = "/inference-profiles/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Aapplication-inference-profile%2Fabc123";
    let mut r = HttpRequest::get(
        format!("https://bedrock.us-west-2.amazonaws.com{path}"),
        llm_http::header_map("test", [("accept", "application/json")]).unwrap(),
    );
    apply_for_method(&auth, "GET", &mut r, signing_time()).unwrap();
    let (expected, canonical_request) = expected_authorization(
        "GET",
        "bedrock.us-west-2.amazonaws.com",
        path,
        &[("accept", "application/json")],
        b"",
        None,
        "us-west-2",
    );
    assert!(canonical_request.starts_with("GET\n"));
    assert_eq!(header(&r, "authorization"), [expected.as_str()]);
    let mut as_post = r.clone();
    apply(&auth, &mut as_post, signing_time()).unwrap();
    assert_ne!(header(&as_post, "authorization"), [expected.as_str()], "the method is signed");
}

#[test]
fn bearer_replaces_any_authorization_header() {
    let mut r = request(ARN_URL);
    apply(&Auth::Bearer(ApiKey::new(BEARER)), &mut r, signing_time()).unwrap();
    assert_eq!(header(&r, "authorization"), [format!("Bearer {BEARER}").as_str()]);
    assert!(header(&r, "x-amz-date").is_empty());
}

#[test]
fn unsignable_requests_are_errors_not_panics() {
    let auth = Auth::SigV4 {
        credentials: AwsCredentials::new(KEY_ID, SECRET, None),
        region: "us-east-1".into(),
    };
    for url in ["/model/x/converse-stream", "not a url", "", "https:///path"] {
        let error = apply(&auth, &mut request(url), signing_time()).unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidRequest, "{url}: {error}");
    }
    // A token that is not a valid header value: an error that does not echo it.
    let bad_token = "FAKE-token-EXAMPLE\nsecond-line";
    let auth = Auth::SigV4 {
        credentials: AwsCredentials::new(KEY_ID, SECRET, Some(bad_token.to_owned())),
        region: "us-east-1".into(),
    };
    let error = apply(&auth, &mut request(ARN_URL), signing_time()).unwrap_err();
    let text = format!("{error} {error:?}");
    assert!(!text.contains("second-line") && !text.contains(SECRET), "{text}");
}

#[test]
fn secrets_never_appear_in_debug_output() {
    let credentials = AwsCredentials::new(KEY_ID, SECRET, Some(TOKEN.to_owned()));
    let sigv4 = Auth::SigV4 { credentials: credentials.clone(), region: "us-east-1".into() };
    let bearer = Auth::Bearer(ApiKey::new(BEARER));
    let mut signed = request(ARN_URL);
    apply(&sigv4, &mut signed, signing_time()).unwrap();
    let signature = header(&signed, "authorization")[0].rsplit('=').next().unwrap().to_owned();
    let mut with_bearer = request(ARN_URL);
    apply(&bearer, &mut with_bearer, signing_time()).unwrap();
    let printed = [
        format!("{credentials:?}"),
        format!("{sigv4:?}"),
        format!("{bearer:?}"),
        format!("{signed:?}"),
        format!("{with_bearer:?}"),
    ];
    for text in &printed {
        for secret in [SECRET, TOKEN, BEARER, signature.as_str()] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
    assert!(printed[0].contains(KEY_ID), "the key id is shown: {}", printed[0]);
    assert!(printed[0].contains("[REDACTED]"), "{}", printed[0]);
}
