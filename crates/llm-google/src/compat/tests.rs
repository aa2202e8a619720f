use super::*;
use serde_json::Value;

#[test]
fn major_version() {
    assert_eq!(gemini_major_version("gemini-2.5-flash"), Some(2));
    assert_eq!(gemini_major_version("models/gemini-3-pro-preview"), Some(3));
    assert_eq!(gemini_major_version("gemini-live-2.5-flash"), Some(2));
    assert_eq!(gemini_major_version("gemini-exp-1206"), None);
    assert_eq!(gemini_major_version("claude-sonnet-4"), None);
}

#[test]
fn compat_accepts_both_spellings_and_rejects_bad_types() {
    let m = |c: Value| Model { compat: Some(c), ..Model::default() };
    assert!(
        GoogleCompat::from_model(&m(serde_json::json!({"use_parameters": true})))
            .unwrap()
            .use_parameters
    );
    assert!(
        GoogleCompat::from_model(&m(serde_json::json!({"useParameters": true, "x": 1})))
            .unwrap()
            .use_parameters
    );
    assert!(GoogleCompat::from_model(&m(serde_json::json!({"useParameters": "yes"}))).is_err());
    assert_eq!(GoogleCompat::from_model(&Model::default()).unwrap(), GoogleCompat::default());
}
