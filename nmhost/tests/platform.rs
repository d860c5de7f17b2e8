//! On macOS the program refuses to start, plainly (see src/platform.rs); Linux runs.

#[test]
fn macos_is_refused_plainly_and_linux_runs() {
    let refusal = herdr_nmhost::platform::unsupported("macos").expect("macOS is refused");
    assert!(refusal.starts_with("macOS is not supported yet: "), "{refusal}");
    assert_eq!(herdr_nmhost::platform::unsupported("linux"), None);
}
