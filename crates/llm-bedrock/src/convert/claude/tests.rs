#![allow(clippy::unwrap_used, reason = "tests")]

use super::*;

fn model(id: &str, name: &str) -> Model {
    Model { id: id.into(), name: name.into(), ..Model::default() }
}

#[test]
fn identity_strips_region_and_vendor_prefixes() {
    assert_eq!(identity("us.anthropic.claude-opus-4-6-v1:0"), "claude-opus-4-6-v1:0");
    assert_eq!(identity("anthropic/claude-sonnet-4.6"), "claude-sonnet-4-6");
    assert_eq!(identity("amazon.nova-pro-v1:0"), "amazon-nova-pro-v1:0");
    assert_eq!(identity("xclaude-3"), "xclaude-3", "claude- must start a segment");
}

#[test]
fn adaptive_and_native_efforts_follow_the_family() {
    let sonnet46 = ClaudeTraits::of(
        &model("us.anthropic.claude-sonnet-4-6-v1:0", ""),
        &BedrockCompat::default(),
    );
    assert!(sonnet46.claude && sonnet46.adaptive);
    assert!(!sonnet46.native_max, "Bedrock's policy: Sonnet 4.6 is not native max");
    let opus46 = ClaudeTraits::of(
        &model("global.anthropic.claude-opus-4-6-v1:0", ""),
        &BedrockCompat::default(),
    );
    assert!(opus46.adaptive && opus46.native_max && !opus46.native_xhigh);
    let opus48 =
        ClaudeTraits::of(&model("anthropic.claude-opus-4.8-v1:0", ""), &BedrockCompat::default());
    assert!(opus48.native_max && opus48.native_xhigh && opus48.rejects_temperature);
    let sonnet45 = ClaudeTraits::of(
        &model("us.anthropic.claude-sonnet-4-5-20250929-v1:0", ""),
        &BedrockCompat::default(),
    );
    assert!(sonnet45.claude && !sonnet45.adaptive && sonnet45.caching);
    let opus40 =
        ClaudeTraits::of(&model("anthropic.claude-opus-4-60-v1", ""), &BedrockCompat::default());
    assert!(!opus40.adaptive, "opus-4-60 is not opus-4-6");
}

#[test]
fn alias_and_profile_name_reveal_the_model() {
    let mut alias = model("production-fable", "");
    alias.compat = Some(serde_json::json!({"canonicalModelId": "claude-fable-5"}));
    let fable = ClaudeTraits::of(&alias, &BedrockCompat::from_model(&alias).unwrap());
    assert!(fable.fable && fable.claude && fable.adaptive && fable.caching);
    let arn = model(
        "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123",
        "Claude Production Opus 4.8",
    );
    let traits = ClaudeTraits::of(&arn, &BedrockCompat::default());
    assert!(traits.claude && traits.adaptive && traits.native_xhigh);
    let mythos = ClaudeTraits::of(
        &model("us.anthropic.claude-mythos-preview", ""),
        &BedrockCompat::default(),
    );
    assert!(mythos.mandatory_adaptive);
}

#[test]
fn cache_support_per_spec() {
    let caches = |id: &str| ClaudeTraits::of(&model(id, ""), &BedrockCompat::default()).caching;
    assert!(caches("us.anthropic.claude-sonnet-4-5-20250929-v1:0"));
    assert!(caches("anthropic.claude-3-7-sonnet-20250219-v1:0"));
    assert!(caches("anthropic.claude-3-5-haiku-20241022-v1:0"));
    assert!(!caches("anthropic.claude-3-haiku-20240307-v1:0"));
    assert!(!caches("anthropic.claude-3-5-sonnet-20240620-v1:0"));
    assert!(!caches("amazon.nova-pro-v1:0"));
    assert!(!caches("amazon.nova-micro-v1:0"));
    assert!(caches(
        "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/my-claude-profile"
    ));
    assert!(!caches("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"));
}
