//! `POST /documents/cancel_pipeline` stops a running update (through the
//! run's own stop flag), and the next update runs clean.

mod common;

use common::*;
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_server::{ServeOptions, Server};
use serde_json::json;

fn processed(addr: std::net::SocketAddr) -> serde_json::Value {
    get(addr, "/documents/status_counts").json()["status_counts"]["processed"].clone()
}

#[test]
fn cancel_pipeline_stops_the_update_and_the_next_one_runs_clean() {
    // Slow model answers keep the update busy long enough to cancel it.
    let mock =
        MockServer::start(MockConfig { latency: std::time::Duration::from_millis(300), ..MockConfig::default() })
            .unwrap();
    let project = project(&mock, &[]);
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(project.path()) }).unwrap();
    let addr = server.addr();
    let r =
        post_json(addr, "/documents/text", &json!({"text": carol("MARLEY'S GHOST", 1500), "file_source": "marley"}));
    assert_eq!(r.json()["status"], "success");
    wait_for("the update to start", || (get(addr, "/documents/pipeline_status").json()["busy"] == true).then_some(()));
    let r = post_json(addr, "/documents/cancel_pipeline", &json!({}));
    assert_eq!(r.json()["status"], "cancellation_requested", "{}", r.text());
    wait_for("the cancelled update to end", || {
        let p = get(addr, "/documents/pipeline_status").json();
        (p["busy"] == false && p["runs"] == 1).then_some(p)
    });
    let p = get(addr, "/documents/pipeline_status").json();
    assert!(p["last_error"].as_str().is_some_and(|e| e.contains("interrupt")), "{p}");
    assert!(p["latest_message"].as_str().unwrap().contains("cancelled"), "{p}");
    assert_ne!(processed(addr), 1);
    // The next run has a flag of its own: it indexes the document.
    assert_eq!(post_json(addr, "/documents/scan", &json!({})).status, 200);
    idle_after(addr, 2);
    assert_eq!(processed(addr), 1);
}
