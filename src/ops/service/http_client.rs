//! The one place an HTTP client is built (the decision backends' client,
//! and the tests' client of the service): with rustls on the `ring`
//! provider, the only crypto provider in the dependency tree.

/// A client builder with the TLS provider installed for the process.
pub fn client_builder() -> reqwest::ClientBuilder {
    // The first call installs the provider; later calls find it installed
    // and return an error that means exactly that.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}
