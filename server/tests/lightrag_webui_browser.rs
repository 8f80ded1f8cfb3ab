//! LightRAG 1.5.7's own built web UI (the `lightrag/api/webui` folder of
//! the lightrag-hku wheel, which .ci/run installs; not copied into this
//! repository) served by `graphrag-rs serve --webui-dir` and driven in
//! headless Chromium: it loads without a login, lists documents and
//! filters them by status, uploads a file that ends processed, searches a
//! label and opens its graph, edits an entity's description, and runs a
//! query whose answer shows the edit. No request of the UI may answer 4xx
//! or 5xx, and the console must show no error. Screenshots go to
//! target/webui-screenshots/lightrag-*.png.
//!
//! Without chromium or the wheel the test is skipped with a message, except
//! under CI (`CI` set), where it fails.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::browser::{chromium_or_skip, launch, Cdp};
use common::*;
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_server::{ServeOptions, Server};
use serde_json::{json, Value};

/// The built web UI inside the installed lightrag-hku package.
fn lightrag_webui() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args(["-c", "import importlib.util as u; print(u.find_spec('lightrag').submodule_search_locations[0])"])
        .output()
        .ok()?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("api/webui");
    (out.status.success() && dir.join("index.html").is_file()).then_some(dir)
}

/// A real click (pressed and released) at the middle of the element.
fn click(page: &mut Cdp, element: &str) {
    let at = page.eval(&format!(
        "(() => {{ const b = ({element}).getBoundingClientRect(); return [b.x + b.width / 2, b.y + b.height / 2]; }})()"
    ));
    for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
        page.call(
            "Input.dispatchMouseEvent",
            json!({"type": kind, "x": at[0], "y": at[1], "button": "left", "clickCount": 1}),
        );
    }
}

/// Radix tabs switch on mouse down.
fn open_tab(page: &mut Cdp, name: &str) {
    let tab =
        format!("[...document.querySelectorAll('button[role=tab]')].find(b => b.innerText.trim() === {})", json!(name));
    page.eval(&format!("(() => {{ const t = {tab}; t.dispatchEvent(new MouseEvent('mousedown', {{bubbles: true, button: 0}})); t.click(); return true; }})()"));
    page.wait_until(name, &format!("{tab}.dataset.state === 'active'"));
}

fn button(text: &str) -> String {
    format!("[...document.querySelectorAll('button')].find(b => b.innerText.trim().startsWith({}))", json!(text))
}

fn body_has(text: &str) -> String {
    format!("document.body?.innerText?.includes({}) === true", json!(text))
}

/// The POST bodies the page sent to `path`.
fn posted(page: &Cdp, path: &str) -> Vec<String> {
    page.events
        .iter()
        .filter(|e| e["method"] == "Network.requestWillBeSent")
        .filter(|e| e["params"]["request"]["url"].as_str().is_some_and(|u| u.ends_with(path)))
        .map(|e| e["params"]["request"]["postData"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The server's and the page's view of the documents, for a wait that
/// timed out: what the pipeline did, what the list says, and the page's
/// failed requests and console messages.
fn explain_documents(addr: std::net::SocketAddr, page: &mut Cdp) -> String {
    let listed = post_json(addr, "/documents/paginated", &json!({"page": 1, "page_size": 10})).text();
    let text = page.eval("document.body?.innerText ?? ''");
    let noted: Vec<String> = page
        .events
        .iter()
        .filter_map(|e| {
            let p = &e["params"];
            match e["method"].as_str()? {
                "Runtime.consoleAPICalled" => Some(format!("console {}: {}", p["type"], p["args"][0]["value"])),
                "Log.entryAdded" => Some(format!("log {}: {}", p["entry"]["level"], p["entry"]["text"])),
                "Network.loadingFailed" => Some(format!("request failed: {}", p["errorText"])),
                "Network.responseReceived" if p["response"]["status"].as_u64().is_some_and(|s| s >= 400) => {
                    Some(format!("{} {}", p["response"]["status"], p["response"]["url"]))
                }
                _ => None,
            }
        })
        .collect();
    format!(
        "pipeline: {}\nhealth: {}\ndocuments: {listed}\npage text: {text}\npage events:\n{}",
        get(addr, "/documents/pipeline_status").text(),
        get(addr, "/health").text(),
        noted.join("\n")
    )
}

#[test]
fn lightrags_web_ui_works_against_graphrag_rs() {
    let Some(chromium) = chromium_or_skip() else { return };
    let Some(webui) = lightrag_webui() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "LightRAG's web UI is not installed (CI installs it: `pip install --no-deps lightrag-hku==1.5.7`)"
        );
        eprintln!("skipped: no lightrag-hku package (`pip install --no-deps lightrag-hku==1.5.7` to run this test)");
        return;
    };
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let project = project(&mock, &[("marley.txt", carol("MARLEY'S GHOST", 1500))]);
    index(project.path());
    let opts = ServeOptions { port: 0, webui_dir: Some(webui), ..ServeOptions::new(project.path()) };
    let server = Server::start(opts).unwrap();
    let addr = server.addr();
    let profile = tempfile::tempdir().unwrap();
    let upload = profile.path().join("fezziwig.txt");
    std::fs::write(&upload, carol("Old Fezziwig", 1500)).unwrap();
    let (browser, mut page) = launch(&chromium, profile.path());
    for domain in ["Page", "Network", "Runtime", "Log"] {
        page.call(&format!("{domain}.enable"), json!({}));
    }

    // Loads without a login (guest mode) and lists the documents.
    page.call("Page.navigate", json!({"url": format!("http://{addr}/webui/")}));
    page.wait_until("the documents list", &body_has("Completed (1)"));
    assert!(page.eval(&body_has("Login Free")) == json!(true), "not in guest mode");

    // Status filters.
    click(&mut page, &button("Failed"));
    wait_for("a paginated request filtered on failed", || {
        page.eval("true");
        posted(&page, "/documents/paginated").iter().any(|b| b.contains("\"failed\"")).then_some(())
    });
    click(&mut page, &button("All"));

    // Upload through the dialog's file input; the document ends processed.
    // A dialog's input has once (in CI) ignored every file given to it for
    // 120 s, the page posting nothing, where every other run posts at once:
    // such a dialog is closed and opened again (at most three dialogs).
    let close = "[...document.querySelectorAll('[role=dialog] button')].find(b => b.innerText.trim() === 'Close')";
    for dialog in 1..=3 {
        click(&mut page, &button("Upload"));
        page.wait_until(
            "the upload dialog",
            &format!("!!document.querySelector('[role=dialog] input[type=file]') && {}", body_has("Supported types")),
        );
        let doc = page.call("DOM.getDocument", json!({}));
        let input = page.call(
            "DOM.querySelector",
            json!({"nodeId": doc["root"]["nodeId"], "selector": "[role=dialog] input[type=file]"}),
        );
        page.call("DOM.setFileInputFiles", json!({"nodeId": input["nodeId"], "files": [upload.display().to_string()]}));
        let given = std::time::Instant::now();
        while posted(&page, "/documents/upload").is_empty() && given.elapsed() < std::time::Duration::from_secs(20) {
            page.eval("true");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if !posted(&page, "/documents/upload").is_empty() {
            break;
        }
        assert!(dialog < 3, "the page posted no upload from three dialogs\n{}", explain_documents(addr, &mut page));
        click(&mut page, close);
        page.wait_until("the dialog to close", "!document.querySelector('[role=dialog]')");
    }
    let processed = body_has("Completed (2)");
    wait_or_explain(
        &mut page,
        "the upload to be processed",
        |page| (page.eval(&processed) == json!(true)).then_some(()),
        |page| explain_documents(addr, page),
    );
    page.screenshot("lightrag-1-documents");
    click(&mut page, close);
    page.wait_until("the dialog to close", "!document.querySelector('[role=dialog]')");

    // Search a label and open its graph.
    let popular = get(addr, "/graph/label/popular?limit=1").json();
    let label = popular[0].as_str().expect("an entity").to_string();
    open_tab(&mut page, "Knowledge Graph");
    click(&mut page, "document.querySelector('[role=combobox]')");
    page.wait_until("the label search box", "document.activeElement?.placeholder === 'Search node name...'");
    page.call("Input.insertText", json!({"text": label[..label.len().min(4)].to_lowercase()}));
    let option = format!(
        "[...document.querySelectorAll('[role=option]')].filter(o => o.innerText.trim() === {}).pop()",
        json!(label)
    );
    page.wait_until("the searched label", &format!("!!{option}"));
    click(&mut page, &option);
    page.wait_until(
        "the label's graph",
        &format!(
            "performance.getEntriesByType('resource').some(r => r.name.includes('/graphs?label={}'))",
            label.replace(' ', "%20")
        ),
    );

    // Select the entity in the graph and edit its description.
    page.eval("document.querySelector('input[placeholder=\"Search nodes in page...\"]').focus(); true");
    page.call("Input.insertText", json!({"text": label}));
    let node = format!(
        "[...document.querySelectorAll('[role=option]')].find(o => o.innerText.trim().startsWith({}))",
        json!(label)
    );
    page.wait_until("the node in the page", &format!("!!{node}"));
    page.eval(&format!("{node}.click(); true"));
    page.wait_until("the node's properties", "document.querySelectorAll('svg.lucide-pencil').length > 0");
    page.screenshot("lightrag-2-graph");
    let runs = get(addr, "/documents/pipeline_status").json()["runs"].as_u64().unwrap();
    click(&mut page, "document.querySelector('svg.lucide-pencil')");
    page.wait_until("the edit dialog", "!!document.querySelector('[role=dialog] textarea')");
    page.eval(
        "(() => { const t = document.querySelector('[role=dialog] textarea'); t.focus(); t.select(); return true; })()",
    );
    page.call("Input.insertText", json!({"text": "EDITED IN LIGHTRAG'S WEB UI"}));
    click(&mut page, "[...document.querySelectorAll('[role=dialog] button')].find(b => b.innerText.trim() === 'Save')");
    page.wait_until("the UI to take the edit", "!document.querySelector('[role=dialog]')");
    assert_eq!(page.eval(&body_has("Failed")), json!(false), "the UI reports a failure");
    wait_for("the edit's update", || {
        let p = get(addr, "/documents/pipeline_status").json();
        (p["busy"] == false && p["runs"].as_u64().unwrap() > runs).then_some(())
    });
    let detail = get(addr, &format!("/graph/entity/detail?name={}", label.replace(' ', "%20"))).json();
    assert_eq!(detail["description"], "EDITED IN LIGHTRAG'S WEB UI", "{detail}");

    // A query: the answer streams in and shows the edit.
    open_tab(&mut page, "Retrieval");
    let query = "document.querySelector('[placeholder^=\"Enter your query\"]')";
    page.wait_until("the query box", &format!("{query}?.offsetParent != null"));
    page.eval(&format!(
        "(() => {{ const i = {query}; i.focus(); Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set.call(i, {}); i.dispatchEvent(new Event('input', {{bubbles: true}})); return true; }})()",
        json!(format!("Who is {label}?"))
    ));
    page.wait_until("the typed query", &format!("{query}.value !== '' && !{}.disabled", button("Send")));
    // A plain click: the edit's toast may cover the button.
    page.eval(&format!("{}.click(); true", button("Send")));
    page.wait_until("the answer", &format!("{} && !{}", body_has("Response time"), button("Stop")));
    page.screenshot("lightrag-3-query");
    let shown = page.eval("document.body.innerText");
    assert!(
        shown.as_str().unwrap().contains("EDITED IN LIGHTRAG'S WEB UI"),
        "the answer does not show the edit: {shown}"
    );

    // Every request answered, and the console is clean.
    page.eval("true");
    let failed: Vec<String> = page
        .events
        .iter()
        .filter(|e| e["method"] == "Network.responseReceived")
        .map(|e| &e["params"]["response"])
        .filter(|r| r["status"].as_u64().unwrap_or(0) >= 400)
        .map(|r| format!("{} {}", r["status"], r["url"]))
        .collect();
    assert!(failed.is_empty(), "requests that failed: {failed:?}");
    let errors: Vec<Value> = page
        .events
        .iter()
        .filter(|e| {
            (e["method"] == "Runtime.consoleAPICalled" && e["params"]["type"] == "error")
                || (e["method"] == "Log.entryAdded" && e["params"]["entry"]["level"] == "error")
                || e["method"] == "Runtime.exceptionThrown"
        })
        .cloned()
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    drop(browser);
}
