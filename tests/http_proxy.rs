//! `http.proxy`: requests through the proxy a policy names, and only that
//! one. A logging proxy fixture on loopback (`HttpFixture::proxy_to`)
//! forwards to the origin fixture; the tests prove the request reached the
//! proxy in absolute form (and an `https` one as a `CONNECT`), that the
//! egress rules judge the target before anything is sent (a refused URL or
//! redirect hop leaves the proxy's log empty of it), that proxies from the
//! environment (`HTTP_PROXY`, …) are never used (a canary proxy's log stays
//! empty), and the loader's refusals of bad proxy URLs with positions.

use serde_json::Value;

use crate::common::Sandbox;
use crate::common::http_fixture::HttpFixture;
use crate::http_steps::{call_record, check, plan, run};

/// The name the proxied tests send to: the stub resolver does not know it,
/// so a request reaches it only when the proxy resolves it.
const NAME: &str = "api.proxied.test";

/// A policy with `proxy` and one rule for `NAME` (not `private`: planrun
/// never resolves the name, the proxy does); `rule_extra` more keys of the
/// rule.
fn proxied_policy(proxy: &str, port: u16, rule_extra: &str) -> String {
    format!(
        r#"version = 1
[retry]
execution_error = 1
[http]
timeout_secs = 2
proxy = "{proxy}"
[[http.allow]]
id = "proxied"
methods = ["GET", "POST"]
scheme = "http"
host = "{NAME}"
port = {port}
path = "/api"
{rule_extra}
"#
    )
}

/// Every environment variable a client might take a proxy from, pointing
/// at `canary`; and a resolver stub that knows no name but `other.test`.
fn canary_env(canary: &str) -> Vec<(&'static str, String)> {
    let mut envs: Vec<(&'static str, String)> =
        ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
            .into_iter()
            .map(|name| (name, canary.to_string()))
            .collect();
    envs.push(("NO_PROXY", String::new()));
    envs.push(("PLANRUN_TEST_RESOLVE", "other.test=192.0.2.1".to_string()));
    envs
}

fn borrowed<'a>(envs: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    envs.iter().map(|(name, value)| (*name, value.as_str())).collect()
}

#[test]
fn a_get_goes_through_the_policy_s_proxy_in_absolute_form_and_the_environment_s_stays_unused() {
    let origin = HttpFixture::start();
    let proxy = HttpFixture::proxy_to(origin.address);
    let canary = HttpFixture::proxy_to(origin.address);
    let sandbox = Sandbox::new();
    let port = origin.port();
    let call = format!("method = \"GET\"\nurl = \"http://{NAME}:{port}/api/items\"");
    let envs = canary_env(&canary.proxy_url());
    let output = run(&sandbox, &plan(&call), &proxied_policy(&proxy.proxy_url(), port, ""), &borrowed(&envs));
    assert_eq!(output.code, 0, "{}", output.snapshot());

    let through_proxy = proxy.requests();
    assert_eq!(through_proxy.len(), 1, "{through_proxy:?}");
    assert_eq!(through_proxy[0].method, "GET");
    assert_eq!(through_proxy[0].target, format!("http://{NAME}:{port}/api/items"));
    let at_origin = origin.requests();
    assert_eq!(at_origin.len(), 1);
    assert_eq!(at_origin[0].target, "/api/items");
    assert_eq!(at_origin[0].header("host"), Some(format!("{NAME}:{port}").as_str()));
    assert!(canary.requests().is_empty(), "the environment's proxy was used: {:?}", canary.requests());

    let record = call_record(&sandbox);
    assert_eq!(record["output_json"]["body"]["items"], serde_json::json!([1, 2]));
    assert_eq!(record["details"]["proxy"], proxy.proxy_url());
    assert_eq!(record["details"]["address"], proxy.address.to_string());
    assert_eq!(record["details"]["rule"], "proxied");
}

#[test]
fn without_a_policy_proxy_the_environment_s_proxies_are_ignored() {
    let origin = HttpFixture::start();
    let canary = HttpFixture::proxy_to(origin.address);
    let sandbox = Sandbox::new();
    // A name (not an IP literal a client might send direct anyway),
    // resolved by planrun to the origin.
    let port = origin.port();
    let policy = crate::http_steps::policy(port, "", "").replace("host = \"127.0.0.1\"", "host = \"api.test\"");
    let call = format!("method = \"GET\"\nurl = \"http://api.test:{port}/api/items\"");
    let mut envs = canary_env(&canary.proxy_url());
    envs.push(("PLANRUN_TEST_RESOLVE", "api.test=127.0.0.1".to_string()));
    envs.retain(|(name, value)| *name != "PLANRUN_TEST_RESOLVE" || value.starts_with("api.test"));
    let output = run(&sandbox, &plan(&call), &policy, &borrowed(&envs));
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert!(canary.requests().is_empty(), "the environment's proxy was used: {:?}", canary.requests());
    assert_eq!(origin.requests().len(), 1);
    let record = call_record(&sandbox);
    assert_eq!(record["details"]["address"], origin.address.to_string());
    assert!(record["details"].get("proxy").is_none(), "{record}");
}

#[test]
fn the_rules_judge_the_target_before_the_proxy_sees_anything() {
    let origin = HttpFixture::start();
    let proxy = HttpFixture::proxy_to(origin.address);
    let sandbox = Sandbox::new();
    let port = origin.port();
    let refused = |url: &str, rule_extra: &str, envs: &[(&str, &str)]| {
        let call = format!("method = \"GET\"\nurl = \"{url}\"");
        let output = run(&sandbox, &plan(&call), &proxied_policy(&proxy.proxy_url(), port, rule_extra), envs);
        assert_eq!(output.code, 1, "{url}: {}", output.snapshot());
        let record = call_record(&sandbox);
        assert_eq!(record["failure_class"], "security_denied", "{url}: {record}");
        record
    };

    // A path no rule allows, a host no rule names, a denied host, userinfo.
    refused(&format!("http://{NAME}:{port}/admin"), "", &[]);
    refused(&format!("http://elsewhere.test:{port}/api/items"), "", &[]);
    let denied =
        proxied_policy(&proxy.proxy_url(), port, "").replace("proxy =", &format!("deny = [\"{NAME}\"]\nproxy ="));
    let call = format!("method = \"GET\"\nurl = \"http://{NAME}:{port}/api/items\"");
    assert_eq!(run(&sandbox, &plan(&call), &denied, &[]).code, 1);
    assert_eq!(call_record(&sandbox)["details"]["rule"], format!("http.deny[{NAME}]"));
    // A private IP literal through a rule without `private = true`, and a
    // cloud metadata name: judged by planrun, proxy or not.
    let policy = proxied_policy(&proxy.proxy_url(), port, "").replace(NAME, "10.0.0.1");
    assert_eq!(run(&sandbox, &plan(&call.replace(NAME, "10.0.0.1")), &policy, &[]).code, 1);
    assert_eq!(call_record(&sandbox)["details"]["rule"], "http.private");
    let policy = proxied_policy(&proxy.proxy_url(), 80, "").replace(NAME, "metadata.google.internal");
    assert_eq!(
        run(&sandbox, &plan("method = \"GET\"\nurl = \"http://metadata.google.internal/api/x\""), &policy, &[]).code,
        1
    );
    assert_eq!(call_record(&sandbox)["details"]["rule"], "http.metadata");
    assert!(proxy.requests().is_empty(), "a refused request reached the proxy: {:?}", proxy.requests());
    assert!(origin.requests().is_empty());

    // A redirect hop to a host no rule allows: only the first request is
    // sent, the hop is refused before it reaches the proxy.
    let hop = format!("http://{NAME}:{port}/api/redirect/1?to=http://elsewhere.test:{port}/api/items");
    let record = refused(&hop, "redirects = 2", &[]);
    assert!(record["error"].as_str().expect("error").contains("redirect to http://elsewhere.test"), "{record}");
    let sent: Vec<String> = proxy.requests().into_iter().map(|request| request.target).collect();
    assert_eq!(sent, vec![hop]);
    // An allowed hop goes through the proxy too.
    let to_items = format!("http://{NAME}:{port}/api/redirect/2?to=/api/items");
    let call = format!("method = \"GET\"\nurl = \"{to_items}\"");
    let output = run(&sandbox, &plan(&call), &proxied_policy(&proxy.proxy_url(), port, "redirects = 1"), &[]);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let last = proxy.requests().pop().expect("the hop");
    assert_eq!(last.target, format!("http://{NAME}:{port}/api/items"));
}

#[test]
fn an_https_request_asks_the_proxy_for_a_connect_tunnel() {
    let origin = HttpFixture::start();
    let proxy = HttpFixture::proxy_to(origin.address);
    let sandbox = Sandbox::new();
    let policy = proxied_policy(&proxy.proxy_url(), 443, "").replace("scheme = \"http\"", "scheme = \"https\"");
    let call = format!("method = \"GET\"\nurl = \"https://{NAME}/api/items\"");
    let output = run(&sandbox, &plan(&call), &policy, &[("PLANRUN_TEST_RESOLVE", "other.test=192.0.2.1")]);
    // The fixture refuses the tunnel (403): the step fails, after asking.
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let record = call_record(&sandbox);
    assert_eq!(record["failure_class"], "execution_error", "{record}");
    let asked = proxy.requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!((asked[0].method.as_str(), asked[0].target.as_str()), ("CONNECT", format!("{NAME}:443").as_str()));
    assert!(origin.requests().is_empty());
}

#[test]
fn the_loader_refuses_bad_proxy_urls_with_their_positions() {
    let step = "method = \"GET\"\nurl = \"http://api.proxied.test:8080/api\"";
    for (proxy, finding) in [
        (
            "https://127.0.0.1:3128",
            "error[invalid-value]: `http.proxy` `https://127.0.0.1:3128` has scheme `https`\n --> policies/default.toml:6:9",
        ),
        (
            "http://user:pw@127.0.0.1:3128",
            "error[invalid-value]: `http.proxy` `http://user:pw@127.0.0.1:3128` holds a user name or password\n --> policies/default.toml:6:9",
        ),
        ("http://127.0.0.1:3128/path", "has a path, query or fragment\n --> policies/default.toml:6:9"),
        ("127.0.0.1:3128", "`http.proxy` `127.0.0.1:3128` is not a URL"),
        ("socks5://127.0.0.1:1080", "has scheme `socks5`"),
    ] {
        let output = check(&plan(step), &proxied_policy(proxy, 8080, ""));
        assert_eq!(output.code, 2, "{proxy}: {}", output.snapshot());
        assert!(output.stdout.contains(finding), "{proxy}: {}", output.snapshot());
    }
    let output = check(&plan(step), &proxied_policy("x", 8080, "").replace("proxy = \"x\"", "proxy = 3128"));
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stdout.contains("error[wrong-type]"), "{}", output.snapshot());
    // A name is a valid proxy host (the only error left is the test
    // folder's missing default plan).
    let output = check(&plan(step), &proxied_policy("http://PROXY.example:3128", 8080, ""));
    assert!(!output.stdout.contains("http.proxy"), "{}", output.snapshot());
    assert!(output.stdout.contains("1 error(s)") && output.stdout.contains("no-default-plan"), "{}", output.snapshot());
}

#[test]
fn policy_check_names_the_proxy_and_extends_keeps_the_parent_s() {
    let sandbox = Sandbox::new();
    sandbox.write("policies/parent.toml", &proxied_policy("http://127.0.0.1:3128", 8080, ""));
    sandbox.write("policies/child.toml", "version = 1\nextends = \"parent\"\n[http]\ntimeout_secs = 1\n");
    sandbox.write("policies/other.toml", "version = 1\nextends = \"parent\"\n[http]\nproxy = \"http://[::1]:8888\"\n");
    let ask = |policy: &str, url: &str| {
        let output = sandbox
            .planrun()
            .in_sandbox()
            .args(["policy", "check", "--policies", "policies", "--policy", policy, "--method", "GET", "--url", url])
            .run();
        serde_json::from_str::<Value>(&output.stdout).expect("json")
    };
    let allowed = format!("http://{NAME}:8080/api/items");
    assert_eq!(ask("parent", &allowed)["proxy"], "http://127.0.0.1:3128");
    assert_eq!(ask("child", &allowed)["proxy"], "http://127.0.0.1:3128");
    assert_eq!(ask("other", &allowed)["proxy"], "http://[::1]:8888");
    let refused = ask("child", &format!("http://{NAME}:8080/admin"));
    assert_eq!(refused["decision"], "forbidden");
    assert!(refused.get("proxy").is_none(), "{refused}");
}
