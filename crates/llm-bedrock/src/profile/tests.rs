//! Which requests ask `GetInferenceProfile`, where the lookup goes and how its answer is
//! read. The end-to-end cases are in `tests/it/app_profile.rs`.
#![allow(clippy::unwrap_used, reason = "tests")]

use serde_json::json;

use super::*;

const OPAQUE: &str = "arn:aws:bedrock:us-west-2:123456789012:application-inference-profile/a1b2c3";

fn model(id: &str, name: &str) -> Model {
    Model { id: id.into(), name: name.into(), ..Model::default() }
}

fn no_env(_: &str) -> Option<String> {
    None
}

fn with_option(key: &str, value: serde_json::Value) -> StreamOptions {
    let mut options = StreamOptions::default();
    options.provider_options.insert(key.into(), value);
    options
}

#[test]
fn application_profile_arns_in_every_partition_and_nothing_else() {
    assert_eq!(app_profile_region(OPAQUE), Some("us-west-2"));
    for partition in ["aws-cn", "aws-us-gov"] {
        let arn = format!("arn:{partition}:bedrock:r-1:1:application-inference-profile/x");
        assert_eq!(app_profile_region(&arn), Some("r-1"), "{arn}");
    }
    for id in [
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude-sonnet-4-5",
        "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-pro-v1:0",
        "arn:aws:sagemaker:us-east-1:1:application-inference-profile/x",
        "arn:aws-eu:bedrock:us-east-1:1:application-inference-profile/x",
        "arn:aws:bedrock:us-east-1:1:application-inference-profile/",
        "arn:aws:bedrock:us-east-1",
    ] {
        assert_eq!(app_profile_region(id), None, "{id}");
    }
}

#[test]
fn only_an_opaque_profile_wanting_cache_points_is_looked_up() {
    let default = StreamOptions::default();
    assert_eq!(lookup_target(&model(OPAQUE, ""), &default, &no_env), Some(OPAQUE));
    let long = StreamOptions { cache_retention: CacheRetention::Long, ..StreamOptions::default() };
    assert_eq!(lookup_target(&model(OPAQUE, ""), &long, &no_env), Some(OPAQUE));
    // Retention none: nothing to decide.
    let none = StreamOptions { cache_retention: CacheRetention::None, ..StreamOptions::default() };
    assert_eq!(lookup_target(&model(OPAQUE, ""), &none, &no_env), None);
    // The heuristic already says Claude: the profile segment, or a display name that caches.
    let named = "arn:aws:bedrock:us-east-1:1:application-inference-profile/my-claude-profile";
    assert_eq!(lookup_target(&model(named, ""), &default, &no_env), None);
    assert_eq!(lookup_target(&model(OPAQUE, "Claude Sonnet 4.5"), &default, &no_env), None);
    // A display name that does not decide it still asks.
    let vague = model(OPAQUE, "Claude Sonnet application profile");
    assert_eq!(lookup_target(&vague, &default, &no_env), Some(OPAQUE));
    // Forced cache points: nothing to decide.
    let forced = with_option("forceCache", json!(true));
    assert_eq!(lookup_target(&model(OPAQUE, ""), &forced, &no_env), None);
    let env = |name: &str| (name == "AWS_BEDROCK_FORCE_CACHE").then(|| "1".to_owned());
    assert_eq!(lookup_target(&model(OPAQUE, ""), &default, &env), None);
    // Not a profile ARN.
    assert_eq!(lookup_target(&model("amazon.nova-pro-v1:0", ""), &default, &no_env), None);
}

fn header<'a>(request: &'a HttpRequest, name: &str) -> Option<&'a str> {
    request.headers.get(name).and_then(|v| v.to_str().ok())
}

const OPAQUE_PATH: &str = "/inference-profiles/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3";

#[test]
fn the_lookup_goes_to_the_control_plane_of_the_arn_region_signed_for_it() {
    let env = |name: &str| match name {
        "AWS_BEDROCK_SKIP_AUTH" => Some("1".to_owned()),
        "AWS_REGION" => Some("eu-west-1".to_owned()),
        _ => None,
    };
    let request = lookup_request(&model(OPAQUE, ""), &StreamOptions::default(), &env).unwrap();
    assert_eq!(request.url, format!("https://bedrock.us-west-2.amazonaws.com{OPAQUE_PATH}"));
    assert!(request.body.is_empty());
    let authorization = header(&request, "authorization").unwrap();
    assert!(authorization.contains("/us-west-2/bedrock/aws4_request"), "{authorization}");
}

#[test]
fn the_lookup_url_follows_fips_china_the_request_region_and_the_option() {
    let fips = |name: &str| (name == "AWS_USE_FIPS_ENDPOINT").then(|| "true".to_owned());
    let bearer = with_option("region", json!("ap-south-1"));
    let options = StreamOptions { api_key: Some(llm_core::ApiKey::new("k")), ..bearer };
    let url = |id: &str, options: &StreamOptions, env: Env<'_>| {
        lookup_request(&model(id, ""), options, env).unwrap().url
    };
    assert!(
        url(OPAQUE, &options, &fips).starts_with("https://bedrock-fips.us-west-2.amazonaws.com/")
    );
    let china = "arn:aws-cn:bedrock:cn-north-1:1:application-inference-profile/x";
    assert!(
        url(china, &options, &no_env).starts_with("https://bedrock.cn-north-1.amazonaws.com.cn/")
    );
    // An ARN without a region: the request's own region.
    let regionless = "arn:aws:bedrock::1:application-inference-profile/x";
    assert!(
        url(regionless, &options, &no_env).starts_with("https://bedrock.ap-south-1.amazonaws.com/")
    );
    let mut routed = options.clone();
    routed.provider_options.insert("controlPlaneUrl".into(), json!(" http://127.0.0.1:9/cp/ "));
    assert_eq!(url(OPAQUE, &routed, &no_env), format!("http://127.0.0.1:9/cp{OPAQUE_PATH}"));
    let request = lookup_request(&model(OPAQUE, ""), &routed, &no_env).unwrap();
    assert_eq!(header(&request, "authorization"), Some("Bearer k"));
}

#[test]
fn the_lookup_reports_auth_and_option_errors() {
    let error = lookup_request(&model(OPAQUE, ""), &StreamOptions::default(), &no_env);
    assert_eq!(error.unwrap_err().kind, ErrorKind::Auth);
    let bad = StreamOptions {
        api_key: Some(llm_core::ApiKey::new("k")),
        ..with_option("controlPlaneUrl", json!(3))
    };
    assert_eq!(
        lookup_request(&model(OPAQUE, ""), &bad, &no_env).unwrap_err().kind,
        ErrorKind::InvalidRequest
    );
}

fn routes(answer: serde_json::Value) -> bool {
    serde_json::from_value::<InferenceProfile>(answer).unwrap().routes_only_to_caching_models()
}

#[test]
fn every_routed_model_must_cache() {
    let arn =
        |id: &str| json!({"modelArn": format!("arn:aws:bedrock:us-east-1::foundation-model/{id}")});
    let sonnet = arn("anthropic.claude-sonnet-4-5-20250929-v1:0");
    let haiku_3_5 = arn("anthropic.claude-3-5-haiku-20241022-v1:0");
    let haiku_3 = arn("anthropic.claude-3-haiku-20240307-v1:0");
    let nova = arn("amazon.nova-pro-v1:0");
    assert!(routes(json!({"models": [sonnet, haiku_3_5], "status": "ACTIVE"})));
    assert!(!routes(json!({"models": [sonnet, nova]})));
    assert!(!routes(json!({"models": [haiku_3]})));
    assert!(!routes(json!({"models": []})));
    let system_profile = json!({"modelArn": "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude-opus-4-6-v1"});
    assert!(routes(json!({"models": [system_profile]})));
    // Not a profile: an error, so the caller falls back and asks again later.
    assert!(serde_json::from_value::<InferenceProfile>(json!({"models": [{}]})).is_err());
    assert!(serde_json::from_value::<InferenceProfile>(json!({"message": "x"})).is_err());
}

#[test]
fn the_cache_keeps_answers_per_arn_and_is_shared_by_clones() {
    let cache = ProfileCache::default();
    assert_eq!(cache.timeout, DEFAULT_LOOKUP_TIMEOUT);
    let clone = cache.clone();
    assert_eq!(cache.get(OPAQUE), None);
    let cell = clone.cell(OPAQUE);
    assert!(Arc::ptr_eq(&cell, &cache.cell(OPAQUE)), "one cell per ARN");
    assert_eq!(cache.get(OPAQUE), None, "an empty cell is no answer");
    assert!(format!("{cache:?}").contains("known_profiles: 0"));
    let traits = ProfileTraits { caching: true, rejects_temperature: false };
    cell.set(traits).unwrap();
    assert_eq!(cache.get(OPAQUE), Some(traits));
    assert_eq!(cache.get("other"), None);
    assert!(format!("{cache:?}").contains("known_profiles: 1"));
}

#[test]
fn a_failed_arn_waits_longer_after_each_failure_and_not_after_a_success() {
    let cache = ProfileCache { backoff: Duration::from_millis(200), ..ProfileCache::default() };
    assert!(!cache.waiting(OPAQUE));
    cache.failed(OPAQUE);
    assert!(cache.waiting(OPAQUE));
    assert!(!cache.waiting("other"), "per ARN");
    assert!(format!("{cache:?}").contains("failed_profiles: 1"));
    std::thread::sleep(Duration::from_millis(250));
    assert!(!cache.waiting(OPAQUE), "the backoff passed");
    cache.failed(OPAQUE);
    std::thread::sleep(Duration::from_millis(250));
    assert!(cache.waiting(OPAQUE), "the second failure waits twice as long");
    std::thread::sleep(Duration::from_millis(250));
    assert!(!cache.waiting(OPAQUE));
    cache.succeeded(OPAQUE);
    cache.failed(OPAQUE);
    std::thread::sleep(Duration::from_millis(250));
    assert!(!cache.waiting(OPAQUE), "a success resets the doubling");
}

#[test]
fn the_cache_forgets_the_least_recently_used_arn_beyond_its_capacity() {
    let cache = ProfileCache { capacity: 3, ..ProfileCache::default() };
    let traits = ProfileTraits { caching: true, rejects_temperature: false };
    for arn in ["a", "b", "c"] {
        cache.cell(arn).set(traits).unwrap();
    }
    assert_eq!(cache.get("a"), Some(traits), "`a` is now the most recently used");
    cache.failed("d");
    assert_eq!(cache.len(), 3);
    assert_eq!(cache.get("b"), None, "`b` was the least recently used");
    assert_eq!((cache.get("a"), cache.get("c")), (Some(traits), Some(traits)));
    assert!(cache.waiting("d"));
    for i in 0..1000 {
        cache.failed(&format!("arn-{i}"));
    }
    assert_eq!(cache.len(), 3, "bounded whatever the number of ARNs");
    assert_eq!(ProfileCache::default().capacity, MAX_PROFILES);
}
