//! The web UI in a real browser: headless Chromium (Debian's `chromium`)
//! loads /webui/, uploads a file, waits until it is processed (the pipeline
//! line never reads "step n/0"), searches entities (one request per pause
//! in typing), opens the graph explorer on an entity and on an unknown name
//! (a message, not "0 nodes"), and runs a query whose Markdown answer is
//! rendered; against a server without a chat model, the query panel says so
//! and shows the context; screenshots go to target/webui-screenshots/. Driven through the DevTools
//! protocol (common/browser.rs).
//!
//! Without chromium the test is skipped with a message, except under CI
//! (`CI` set), where it fails: .ci/run installs chromium.

mod common;

use common::browser::{chromium_or_skip, launch};
use common::*;
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_server::{ServeOptions, Server};
use serde_json::json;

#[test]
fn the_web_ui_uploads_explores_and_queries_in_chromium() {
    let Some(chromium) = chromium_or_skip() else { return };
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let project = project(&mock, &[("marley.txt", carol("MARLEY'S GHOST", 1500))]);
    index(project.path());
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(project.path()) }).unwrap();
    let addr = server.addr();
    let profile = tempfile::tempdir().unwrap();
    let upload = profile.path().join("fezziwig.txt");
    std::fs::write(&upload, carol("Old Fezziwig", 1500)).unwrap();
    let (browser, mut page) = launch(&chromium, profile.path());
    page.call("Page.enable", json!({}));
    page.call("Page.navigate", json!({"url": format!("http://{addr}/webui/")}));
    page.wait_until("the documents list", "!!document.querySelector('#doc-table tbody tr[data-file=\"marley.txt\"]')");

    // Every pipeline line the page shows, to check none reads "step n/0".
    page.eval(
        "window.pipelineLines = []; new MutationObserver(() => pipelineLines.push(document.querySelector('#pipeline').textContent)).observe(document.querySelector('#pipeline'), {childList: true, characterData: true, subtree: true}); true",
    );

    // Upload through the file input and the Upload button.
    let doc = page.call("DOM.getDocument", json!({}));
    let input = page.call("DOM.querySelector", json!({"nodeId": doc["root"]["nodeId"], "selector": "#file-input"}));
    page.call("DOM.setFileInputFiles", json!({"nodeId": input["nodeId"], "files": [upload.display().to_string()]}));
    page.eval("document.querySelector('#upload-btn').click(); true");
    page.wait_until(
        "the upload to be processed",
        "document.querySelector('#doc-table tbody tr[data-file=\"fezziwig.txt\"]')?.dataset.status === 'processed'",
    );
    page.screenshot("1-documents");
    let lines = page.eval("pipelineLines");
    assert!(!lines.as_array().unwrap().is_empty());
    assert!(lines.as_array().unwrap().iter().all(|l| !l.as_str().unwrap().contains("/0 ")), "{lines}");

    // Entity search: typing a name key by key asks the server once, after the pause.
    page.eval(
        "window.labelRequests = 0; const realFetch = window.fetch; window.fetch = (url, opts) => { if (String(url).includes('/graph/label/list')) labelRequests++; return realFetch(url, opts); }; document.querySelector('#tab-graph').click(); document.querySelector('#entity-search').focus(); true",
    );
    for key in ["f", "e", "z", "z", "i"] {
        page.call("Input.insertText", json!({ "text": key }));
    }
    page.wait_until("the suggestions", "document.querySelectorAll('#entity-list option').length > 0");
    assert_eq!(page.eval("labelRequests"), json!(1));

    // The graph explorer on an entity of the new document.
    let labels = get(addr, "/graph/label/list?q=fezziwig").json();
    let entity = labels[0].as_str().expect("an entity of the uploaded document").to_string();
    page.eval(&format!(
        "document.querySelector('#tab-graph').click(); document.querySelector('#entity-search').value = {}; document.querySelector('#show-graph').click(); true",
        json!(entity)
    ));
    page.wait_until("the node details", "!!document.querySelector('#node-details h3')");
    let shown = page.eval("document.querySelector('#node-details h3').textContent");
    assert_eq!(shown, json!(entity));
    assert!(page.eval("document.querySelectorAll('#node-details .unit').length").as_u64().unwrap() >= 1);
    page.screenshot("2-graph");

    // An unknown name: a message saying so, not an empty canvas.
    page.eval(
        "document.querySelector('#entity-search').value = 'Nobody Of That Name'; document.querySelector('#show-graph').click(); true",
    );
    page.wait_until(
        "the empty-graph message",
        "document.querySelector('#graph-info').textContent.includes('No entity named')",
    );
    assert!(page.text("#node-details").contains("Nobody Of That Name"));
    page.screenshot("2b-unknown-entity");

    // A streamed query with its context records.
    page.eval(
        "document.querySelector('#tab-query').click(); document.querySelector('#query-text').value = 'Who is Fezziwig?'; document.querySelector('#query-method').value = 'basic'; document.querySelector('#query-run').click(); true",
    );
    page.wait_until("the answer", "document.querySelector('#query-answer').dataset.done === '1'");
    let answer = page.eval("document.querySelector('#query-answer').textContent");
    assert!(!answer.as_str().unwrap().is_empty() && !answer.as_str().unwrap().starts_with("Error"), "{answer}");
    // The mock model answers in Markdown: rendered as HTML, no `##` left.
    assert!(page.eval("document.querySelectorAll('#query-answer h2').length").as_u64().unwrap() >= 1, "{answer}");
    assert!(!answer.as_str().unwrap().contains("## "), "{answer}");
    assert!(page
        .eval("document.querySelector('#query-references').textContent")
        .as_str()
        .unwrap()
        .contains("fezziwig.txt"));
    assert!(page.eval("document.querySelectorAll('#query-records table').length").as_u64().unwrap() >= 1);
    page.screenshot("3-query");

    // Context only: shown as the retrieved context, labelled, not rendered as an answer.
    page.eval(
        "document.querySelector('#query-context-only').checked = true; document.querySelector('#query-run').click(); true",
    );
    page.wait_until("the context", "document.querySelector('#query-answer').dataset.done === '1'");
    assert!(page.text("#query-answer .notice").contains("Retrieved context"));
    assert!(page.text("#query-answer pre.context").contains("Fezziwig"));

    // A server without a usable chat model: the query panel says so and
    // asks for the context, which it shows.
    let bare = project_without_chat_model(&mock);
    let bare_server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(bare.path()) }).unwrap();
    page.call("Page.navigate", json!({"url": format!("http://{}/webui/", bare_server.addr())}));
    page.wait_until(
        "the no-model notice",
        "!!document.querySelector('#query-notice')?.textContent.includes('no api_key')",
    );
    assert_eq!(page.eval("document.querySelector('#query-context-only').checked"), json!(true));
    page.eval(
        "document.querySelector('#tab-query').click(); document.querySelector('#query-text').value = 'Who is Fezziwig?'; document.querySelector('#query-method').value = 'basic'; document.querySelector('#query-run').click(); true",
    );
    page.wait_until("the context", "document.querySelector('#query-answer').dataset.done === '1'");
    assert!(page.text("#query-answer pre.context").contains("Fezziwig"));
    page.screenshot("4-no-chat-model");
    drop(browser);
}
