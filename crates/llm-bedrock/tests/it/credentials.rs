//! AWS's default credential chain (feature `aws-config`), each source through the public
//! API: files in a scratch HOME, endpoints on loopback, the environment injected with
//! `with_env` (the process environment is never read or changed).
#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use aws_smithy_types::DateTime;
use aws_smithy_types::date_time::Format;
use llm_bedrock::{Bedrock, BedrockProvider};
use llm_core::{AssistantMessage, Context, ErrorKind, Message, Model, Provider, StreamOptions};
use llm_http::ProviderBuilder;
use llm_testkit::eventstream::converse_text;
use llm_testkit::fixture::{Canned, Responses};
use llm_testkit::server::{Chunking, Recorded, Server};
use serde_json::{Value, json};
use sha1::Digest;

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir()
            .join(format!("clawcall-bedrock-credentials-{}-{n}", std::process::id()));
        std::fs::create_dir_all(dir.join("home")).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    /// The environment of a machine with no credentials: a HOME without `.aws`, no
    /// instance metadata, shared files at paths of their own.
    fn env(&self, extra: &[(&str, &str)]) -> HashMap<String, String> {
        let mut vars: HashMap<String, String> = [
            ("HOME", self.path("home")),
            ("AWS_CONFIG_FILE", self.path("config")),
            ("AWS_SHARED_CREDENTIALS_FILE", self.path("credentials")),
            ("AWS_REGION", "us-west-2".to_owned()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        vars.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        vars
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn json_answer(body: Value) -> Canned {
    Canned::new(200, [("content-type", "application/json")], body.to_string())
}

/// An RFC 3339 time `from_now` ahead.
fn rfc3339(from_now: Duration) -> String {
    DateTime::from(SystemTime::now() + from_now).fmt(Format::DateTime).unwrap()
}

async fn start(responses: Vec<Canned>) -> Server {
    Server::start(Responses::Sequence(responses), Chunking::Whole).await.unwrap()
}

async fn ask(provider: &BedrockProvider, server: &Server) -> AssistantMessage {
    let model = Model {
        id: "amazon.nova-pro-v1:0".into(),
        api: llm_bedrock::API.into(),
        provider: llm_bedrock::PROVIDER.into(),
        base_url: format!("http://{}", server.addr),
        ..Model::default()
    };
    let context = Context { messages: vec![Message::user("Hi")], ..Context::default() };
    provider.complete(&model, &context, &StreamOptions::default()).await
}

/// The request was signed with `key_id` and carries `token`.
fn assert_signed_with(request: &Recorded, key_id: &str, token: &str) {
    assert_eq!(request.method, "POST");
    let authorization = request.header("authorization").unwrap();
    assert!(
        authorization.starts_with(&format!("AWS4-HMAC-SHA256 Credential={key_id}/")),
        "{authorization}"
    );
    assert!(authorization.contains("/us-west-2/bedrock/aws4_request"), "{authorization}");
    assert_eq!(request.header("x-amz-security-token"), Some(token));
}

/// `credential_process` in a selected profile; the environment's keys are skipped for the
/// profile. Credentials close to their expiry are resolved again; fresh ones are reused.
#[tokio::test]
async fn credential_process_credentials_are_refreshed_before_they_expire() {
    use std::os::unix::fs::PermissionsExt;

    let scratch = Scratch::new();
    // Valid for five minutes and two seconds: inside the refresh window two seconds later.
    let expiration = rfc3339(Duration::from_secs(5 * 60 + 2));
    let script = scratch.write(
        "creds.sh",
        &format!(
            "#!/bin/sh\nn=$(cat '{count}' 2>/dev/null || echo 0)\nn=$((n+1))\necho $n > '{count}'\n\
             printf '{{\"Version\":1,\"AccessKeyId\":\"ASIAEXAMPLEPROCESS%02d\",\
             \"SecretAccessKey\":\"process-secret-EXAMPLE\",\"SessionToken\":\"process-token-%d\",\
             \"Expiration\":\"{expiration}\"}}' $n $n\n",
            count = scratch.path("count"),
        ),
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    scratch.write("config", &format!("[profile tools]\ncredential_process = {script}\n"));
    let env = scratch.env(&[
        ("AWS_PROFILE", "tools"),
        ("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEENVIRONMENT"),
        ("AWS_SECRET_ACCESS_KEY", "environment-secret-EXAMPLE"),
    ]);
    let provider = BedrockProvider::builder().env(env).build();
    let server = start(vec![
        converse_text("ok").unwrap(),
        converse_text("ok").unwrap(),
        converse_text("ok").unwrap(),
    ])
    .await;
    for _ in 0..2 {
        let message = ask(&provider, &server).await;
        assert_eq!(message.error_message, None);
    }
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let message = ask(&provider.clone(), &server).await;
    assert_eq!(message.error_message, None);
    let recorded = server.recorded();
    assert_signed_with(&recorded[0], "ASIAEXAMPLEPROCESS01", "process-token-1");
    assert_signed_with(&recorded[1], "ASIAEXAMPLEPROCESS01", "process-token-1");
    assert_signed_with(&recorded[2], "ASIAEXAMPLEPROCESS02", "process-token-2");
    assert_eq!(std::fs::read_to_string(scratch.path("count")).unwrap().trim(), "2");
    let shown = format!("{provider:?}");
    assert!(!shown.contains("process-secret") && !shown.contains("environment-secret"), "{shown}");
}

/// Web identity from the environment: the token file is exchanged at STS (on loopback
/// through `AWS_ENDPOINT_URL_STS`) for role credentials.
#[tokio::test]
async fn web_identity_credentials_come_from_sts() {
    let scratch = Scratch::new();
    let token_file = scratch.write("token", "web-identity-token-EXAMPLE");
    let expiration = rfc3339(Duration::from_secs(3600));
    let sts = Canned::new(
        200,
        [("content-type", "text/xml")],
        format!(
            "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
             <AssumeRoleWithWebIdentityResult><Credentials>\
             <AccessKeyId>ASIAEXAMPLEWEBIDENTITY</AccessKeyId>\
             <SecretAccessKey>web-secret-EXAMPLE</SecretAccessKey>\
             <SessionToken>web-token-EXAMPLE</SessionToken>\
             <Expiration>{expiration}</Expiration></Credentials>\
             <AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/reader/clawcall</Arn>\
             <AssumedRoleId>AROAEXAMPLE:clawcall</AssumedRoleId></AssumedRoleUser>\
             </AssumeRoleWithWebIdentityResult>\
             <ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>\
             </AssumeRoleWithWebIdentityResponse>"
        ),
    );
    let server = start(vec![sts, converse_text("ok").unwrap()]).await;
    let endpoint = format!("http://{}", server.addr);
    let env = scratch.env(&[
        ("AWS_WEB_IDENTITY_TOKEN_FILE", &token_file),
        ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/reader"),
        ("AWS_ROLE_SESSION_NAME", "clawcall"),
        ("AWS_ENDPOINT_URL_STS", &endpoint),
    ]);
    let message = ask(&BedrockProvider::builder().env(env).build(), &server).await;
    assert_eq!(message.error_message, None);
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 2);
    let form = String::from_utf8(recorded[0].body.to_vec()).unwrap();
    assert!(form.contains("Action=AssumeRoleWithWebIdentity"), "{form}");
    assert!(form.contains("WebIdentityToken=web-identity-token-EXAMPLE"), "{form}");
    assert_signed_with(&recorded[1], "ASIAEXAMPLEWEBIDENTITY", "web-token-EXAMPLE");
}

/// Assume-role in a profile: the source profile's static keys sign STS's `AssumeRole` (on
/// loopback through `AWS_ENDPOINT_URL_STS`), and the role's credentials sign the request.
#[tokio::test]
async fn assume_role_profiles_ask_sts_with_the_source_profile() {
    let scratch = Scratch::new();
    scratch.write(
        "config",
        "[profile base]\naws_access_key_id = AKIAEXAMPLESOURCE\n\
         aws_secret_access_key = source-secret-EXAMPLE\n\n\
         [profile deploy]\nrole_arn = arn:aws:iam::123456789012:role/deploy\n\
         source_profile = base\nrole_session_name = clawcall\n",
    );
    let expiration = rfc3339(Duration::from_secs(3600));
    let sts = Canned::new(
        200,
        [("content-type", "text/xml")],
        format!(
            "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
             <AssumeRoleResult><Credentials>\
             <AccessKeyId>ASIAEXAMPLEROLE</AccessKeyId>\
             <SecretAccessKey>role-secret-EXAMPLE</SecretAccessKey>\
             <SessionToken>role-token-EXAMPLE</SessionToken>\
             <Expiration>{expiration}</Expiration></Credentials>\
             <AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/deploy/clawcall</Arn>\
             <AssumedRoleId>AROAEXAMPLE:clawcall</AssumedRoleId></AssumedRoleUser>\
             </AssumeRoleResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>\
             </AssumeRoleResponse>"
        ),
    );
    let server = start(vec![sts, converse_text("ok").unwrap()]).await;
    let endpoint = format!("http://{}", server.addr);
    let env = scratch.env(&[("AWS_PROFILE", "deploy"), ("AWS_ENDPOINT_URL_STS", &endpoint)]);
    let message = ask(&BedrockProvider::builder().env(env).build(), &server).await;
    assert_eq!(message.error_message, None);
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 2);
    let form = String::from_utf8(recorded[0].body.to_vec()).unwrap();
    assert!(form.contains("Action=AssumeRole&"), "{form}");
    assert!(form.contains("RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fdeploy"), "{form}");
    let authorization = recorded[0].header("authorization").unwrap();
    assert!(authorization.contains("Credential=AKIAEXAMPLESOURCE/"), "{authorization}");
    assert_signed_with(&recorded[1], "ASIAEXAMPLEROLE", "role-token-EXAMPLE");
}

/// Container credentials from `AWS_CONTAINER_CREDENTIALS_FULL_URI`, with its authorization
/// token.
#[tokio::test]
async fn container_credentials_come_from_the_full_uri() {
    let scratch = Scratch::new();
    let container = json_answer(json!({
        "AccessKeyId": "ASIAEXAMPLECONTAINER",
        "SecretAccessKey": "container-secret-EXAMPLE",
        "Token": "container-token-EXAMPLE",
        "Expiration": rfc3339(Duration::from_secs(3600)),
    }));
    let server = start(vec![container, converse_text("ok").unwrap()]).await;
    let uri = format!("http://{}/v2/credentials/abc", server.addr);
    let env = scratch.env(&[
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &uri),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "container-auth-EXAMPLE"),
    ]);
    let message = ask(&BedrockProvider::builder().env(env).build(), &server).await;
    assert_eq!(message.error_message, None);
    let recorded = server.recorded();
    assert_eq!(
        (recorded[0].method.as_str(), recorded[0].path.as_str()),
        ("GET", "/v2/credentials/abc")
    );
    assert_eq!(recorded[0].header("authorization"), Some("container-auth-EXAMPLE"));
    assert_signed_with(&recorded[1], "ASIAEXAMPLECONTAINER", "container-token-EXAMPLE");
}

/// Instance metadata (IMDSv2) at `AWS_EC2_METADATA_SERVICE_ENDPOINT`: a session token, the
/// role name, then the role's credentials.
#[tokio::test]
async fn instance_metadata_credentials_use_an_imdsv2_session() {
    imds_round_trip(|_| BedrockProvider::builder()).await;
}

/// Instance metadata is asked without the HTTP client's proxy (a proxy cannot reach it and
/// must not see its token), while the runtime request keeps the client as given.
#[tokio::test]
async fn instance_metadata_never_goes_through_the_clients_proxy() {
    imds_round_trip(|metadata_port| {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let proxy = format!("http://{closed}");
        let metadata_only = reqwest::Proxy::custom(move |url| {
            (url.port() == Some(metadata_port)).then(|| proxy.clone())
        });
        let client = reqwest::Client::builder().proxy(metadata_only).build().unwrap();
        BedrockProvider::builder().http_client(client)
    })
    .await;
}

/// A metadata server and a runtime server; `provider` gets the metadata server's port.
async fn imds_round_trip(provider: impl FnOnce(u16) -> ProviderBuilder<Bedrock>) {
    let scratch = Scratch::new();
    let metadata = start(vec![
        Canned::new(
            200,
            [("x-aws-ec2-metadata-token-ttl-seconds", "21600")],
            "imds-session-EXAMPLE",
        ),
        Canned::new(200, [("content-type", "text/plain")], "reader-role"),
        json_answer(json!({
            "Code": "Success",
            "LastUpdated": rfc3339(Duration::ZERO),
            "Type": "AWS-HMAC",
            "AccessKeyId": "ASIAEXAMPLEINSTANCE",
            "SecretAccessKey": "instance-secret-EXAMPLE",
            "Token": "instance-token-EXAMPLE",
            "Expiration": rfc3339(Duration::from_secs(3600)),
        })),
    ])
    .await;
    let server = start(vec![converse_text("ok").unwrap()]).await;
    let mut env = scratch.env(&[]);
    env.remove("AWS_EC2_METADATA_DISABLED");
    env.insert("AWS_EC2_METADATA_SERVICE_ENDPOINT".into(), format!("http://{}", metadata.addr));
    let message = ask(&provider(metadata.addr.port()).env(env).build(), &server).await;
    assert_eq!(message.error_message, None);
    let recorded = metadata.recorded();
    let calls: Vec<(&str, &str)> =
        recorded.iter().map(|r| (r.method.as_str(), r.path.as_str())).collect();
    assert_eq!(
        calls,
        [
            ("PUT", "/latest/api/token"),
            ("GET", "/latest/meta-data/iam/security-credentials/"),
            ("GET", "/latest/meta-data/iam/security-credentials/reader-role"),
        ]
    );
    assert!(recorded[0].header("x-aws-ec2-metadata-token-ttl-seconds").is_some());
    for call in &recorded[1..] {
        assert_eq!(call.header("x-aws-ec2-metadata-token"), Some("imds-session-EXAMPLE"));
    }
    assert_signed_with(&server.recorded()[0], "ASIAEXAMPLEINSTANCE", "instance-token-EXAMPLE");
}

/// An SSO profile: the access token from the SSO token cache (`~/.aws/sso/cache/<sha1 of the
/// session name>.json`), exchanged at the portal (on loopback through
/// `AWS_ENDPOINT_URL_SSO`) for the role's credentials.
#[tokio::test]
async fn sso_credentials_come_from_the_token_cache_and_the_portal() {
    let scratch = Scratch::new();
    scratch.write(
        "config",
        "[profile dev]\nsso_session = corp\nsso_account_id = 123456789012\n\
         sso_role_name = Reader\nregion = us-west-2\n\n\
         [sso-session corp]\nsso_start_url = https://example.awsapps.com/start\n\
         sso_region = us-east-1\n",
    );
    let digest: String = sha1::Sha1::digest(b"corp").iter().map(|b| format!("{b:02x}")).collect();
    scratch.write(
        &format!("home/.aws/sso/cache/{digest}.json"),
        &json!({
            "accessToken": "sso-access-token-EXAMPLE",
            "expiresAt": rfc3339(Duration::from_secs(3600)),
            "region": "us-east-1",
            "startUrl": "https://example.awsapps.com/start",
        })
        .to_string(),
    );
    let expiration_ms = (SystemTime::now() + Duration::from_secs(3600))
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let portal = json_answer(json!({"roleCredentials": {
        "accessKeyId": "ASIAEXAMPLESSO",
        "secretAccessKey": "sso-secret-EXAMPLE",
        "sessionToken": "sso-token-EXAMPLE",
        "expiration": expiration_ms,
    }}));
    let server = start(vec![portal, converse_text("ok").unwrap()]).await;
    let endpoint = format!("http://{}", server.addr);
    let env = scratch.env(&[("AWS_PROFILE", "dev"), ("AWS_ENDPOINT_URL_SSO", &endpoint)]);
    let message = ask(&BedrockProvider::builder().env(env).build(), &server).await;
    assert_eq!(message.error_message, None);
    let recorded = server.recorded();
    assert_eq!(
        (recorded[0].method.as_str(), recorded[0].path.as_str()),
        ("GET", "/federation/credentials")
    );
    let query = recorded[0].query.clone().unwrap_or_default();
    assert!(
        query.contains("role_name=Reader") && query.contains("account_id=123456789012"),
        "{query}"
    );
    assert_eq!(recorded[0].header("x-amz-sso_bearer_token"), Some("sso-access-token-EXAMPLE"));
    assert_signed_with(&recorded[1], "ASIAEXAMPLESSO", "sso-token-EXAMPLE");
}

/// No source at all: an auth error naming what was tried and what the chain said, with no
/// secret in it, and nothing sent to the runtime.
#[tokio::test]
async fn no_credentials_anywhere_names_the_chain() {
    let scratch = Scratch::new();
    let env = scratch.env(&[("AWS_SECRET_ACCESS_KEY", "lonely-secret-EXAMPLE")]);
    let server = start(vec![converse_text("ok").unwrap()]).await;
    let message = ask(&BedrockProvider::builder().env(env).build(), &server).await;
    assert_eq!(message.error_type.as_deref(), Some(ErrorKind::Auth.as_str()));
    let text = message.error_message.unwrap();
    assert!(text.contains("AWS_SECRET_ACCESS_KEY is set, AWS_ACCESS_KEY_ID is not"), "{text}");
    assert!(text.contains("the default credential chain"), "{text}");
    assert!(!text.contains("lonely-secret"), "{text}");
    assert!(server.recorded().is_empty());
}

/// A credential endpoint that accepts and never answers is bounded by the credentials
/// timeout.
#[tokio::test]
async fn a_silent_credential_endpoint_is_bounded() {
    let scratch = Scratch::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let uri = format!("http://{addr}/creds");
    let env = scratch.env(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", &uri)]);
    let provider = BedrockProvider::builder()
        .wire(Bedrock::default().with_credentials_timeout(Duration::from_millis(500)))
        .env(env)
        .build();
    let server = start(vec![converse_text("ok").unwrap()]).await;
    let started = std::time::Instant::now();
    let message = ask(&provider, &server).await;
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(400) && waited < Duration::from_secs(5), "{waited:?}");
    assert_eq!(message.error_type.as_deref(), Some(ErrorKind::Auth.as_str()));
    let text = message.error_message.unwrap();
    assert!(text.contains("no answer within 500 ms"), "{text}");
    assert!(server.recorded().is_empty());
    holder.abort();
}
