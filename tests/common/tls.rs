//! Certificates for TLS tests, made with the `openssl` command: CAs and a
//! server certificate for 127.0.0.1 (the PostgreSQL TLS tests, the
//! `https://` model endpoint tests).

use std::path::Path;
use std::process::Command;

/// Runs `openssl ARGS` in `dir`; fails the test with its stderr otherwise.
fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl").args(args).current_dir(dir).output().expect("run openssl");
    assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// A CA (`<dir>/<name>.pem`, `<name>.key`), valid for two days.
pub fn make_ca(dir: &Path, name: &str) {
    let subject = format!("/CN=planrun test {name}");
    let (key, pem) = (format!("{name}.key"), format!("{name}.pem"));
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &subject,
            "-keyout",
            &key,
            "-out",
            &pem,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

/// A server certificate for `127.0.0.1` (`<dir>/server.pem`, `server.key`)
/// signed by CA `ca` (made by [`make_ca`] in `dir`), valid for two days.
pub fn make_server_cert(dir: &Path, ca: &str) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=planrun test server",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    let extensions = "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
        keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n";
    std::fs::write(dir.join("server.ext"), extensions).expect("extensions");
    let (ca_pem, ca_key) = (format!("{ca}.pem"), format!("{ca}.key"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ],
    );
}
