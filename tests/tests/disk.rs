//! Disk use with the real docker CLI: `docker system df` (images unpacked,
//! what containers wrote, what volumes hold; the kinds asked for), the
//! sizes `inspect --size` and `ps --size` measure, and `docker image prune`
//! (dangling: none can exist in containerd's store; `-a`: every image no
//! container uses).

use holdfast_e2e::Daemon;
use holdfast_testkit::busybox_image_with_ballast;
use serde_json::Value;

#[test]
fn system_df_measures_and_image_prune_removes_only_unused_images() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let extra = busybox_image_with_ballast(dir.path(), "extra:1", None, 300_000);
    d.ok(&["load", "-i", extra.docker_archive.to_str().expect("utf-8")]);
    d.ok(&["run", "-d", "--name", "writer", "busybox", "sleep", "1000"]);
    d.ok(&[
        "exec",
        "writer",
        "sh",
        "-c",
        "head -c 1000000 /dev/zero > /big",
    ]);
    d.ok(&["volume", "create", "vol"]);
    d.ok(&[
        "run",
        "--rm",
        "-v",
        "vol:/data",
        "busybox",
        "sh",
        "-c",
        "head -c 500000 /dev/zero > /data/f",
    ]);

    let df = d.http("GET", "/system/df", None);
    assert_eq!(df.status, 200, "{df:?}");
    let df: Value = df.json().expect("JSON");
    let images = df["Images"].as_array().cloned().unwrap_or_default();
    assert_eq!(images.len(), 2, "{df}");
    let extra_size = images
        .iter()
        .find(|i| i["RepoTags"][0] == "extra:1")
        .map(|i| (i["Size"].as_i64().unwrap_or(0), i["Containers"].clone()));
    assert!(
        extra_size
            .as_ref()
            .is_some_and(|(s, n)| *s >= 300_000 && *n == 0),
        "the extra image holds its ballast and no container: {df}"
    );
    // `docker images` and `inspect` say the same sizes as df, and count
    // the containers made from each image.
    let listed = d.http("GET", "/images/json", None);
    let listed: Value = listed.json().expect("JSON");
    for i in listed.as_array().cloned().unwrap_or_default() {
        let tag = &i["RepoTags"][0];
        let in_df = images.iter().find(|x| x["RepoTags"][0] == *tag);
        assert_eq!(
            in_df.map(|x| (&x["Size"], &x["Containers"])),
            Some((&i["Size"], &i["Containers"])),
            "{i}\n{df}"
        );
        let name = tag.as_str().unwrap_or_default();
        let inspected = d.ok(&["image", "inspect", "-f", "{{.Size}}", name]);
        assert_eq!(inspected.trim(), i["Size"].to_string(), "{name}");
    }
    let writer = &df["Containers"][0];
    assert!(
        writer["SizeRw"].as_i64().is_some_and(|s| s >= 1_000_000),
        "what the container wrote: {writer}"
    );
    let busybox_size = images
        .iter()
        .find(|i| i["RepoTags"][0] == "busybox:latest")
        .and_then(|i| i["Size"].as_i64())
        .unwrap_or(0);
    let size_rw = writer["SizeRw"].as_i64().unwrap_or(0);
    assert_eq!(
        writer["SizeRootFs"].as_i64(),
        Some(size_rw + busybox_size),
        "its root: its image and what it wrote: {writer}"
    );
    // `inspect --size` and `ps --size` measure the same; without `size`
    // nothing is measured and nothing made up.
    let inspected = d.http("GET", "/containers/writer/json?size=1", None);
    let inspected = inspected.json().unwrap_or_default();
    assert_eq!(
        (
            inspected["SizeRw"].as_i64(),
            inspected["SizeRootFs"].as_i64()
        ),
        (Some(size_rw), Some(size_rw + busybox_size)),
        "{inspected}"
    );
    let plain = d
        .http("GET", "/containers/writer/json", None)
        .json()
        .unwrap_or_default();
    assert!(
        plain.get("SizeRw").is_none() && plain.get("SizeRootFs").is_none(),
        "not asked, not shown: {plain}"
    );
    let listed = d.ok(&["ps", "--size", "--format", "{{.Names}} {{.Size}}"]);
    assert!(
        listed.starts_with("writer ") && listed.contains("B (virtual "),
        "ps --size: {listed}"
    );
    // `type` measures only the kinds asked for.
    let only = d.http("GET", "/system/df?type=volume&type=image", None);
    let only: Value = only.json().unwrap_or_default();
    assert!(
        only["Containers"].is_null()
            && only["Images"].as_array().is_some_and(|i| i.len() == 2)
            && only["Volumes"].as_array().is_some_and(|v| v.len() == 1),
        "{only}"
    );
    let refused = d.http("GET", "/system/df?type=layers", None);
    assert_eq!(
        (refused.status, refused.message().as_deref()),
        (400, Some("unknown object type: layers")),
        "{refused:?}"
    );
    let vol = &df["Volumes"][0];
    assert_eq!(
        (
            &vol["Name"],
            &vol["UsageData"]["Size"],
            &vol["UsageData"]["RefCount"]
        ),
        (
            &serde_json::json!("vol"),
            &serde_json::json!(500_000),
            &serde_json::json!(0)
        ),
        "{vol}"
    );
    // The CLI's summary: two images, one in use; one running container.
    let rows = d.ok(&[
        "system",
        "df",
        "--format",
        "{{.Type}} {{.TotalCount}} {{.Active}}",
    ]);
    for want in ["Images 2 1", "Containers 1 1", "Local Volumes 1 0"] {
        assert!(rows.lines().any(|l| l == want), "{want:?} in\n{rows}");
    }

    // Dangling only: there are none.
    let out = d.ok(&["image", "prune", "-f"]);
    assert!(out.contains("Total reclaimed space: 0B"), "{out}");
    // A label no image has: nothing goes.
    let out = d.ok(&[
        "image",
        "prune",
        "-a",
        "-f",
        "--filter",
        "label=no-such-label",
    ]);
    assert!(out.contains("Total reclaimed space: 0B"), "{out}");
    assert!(
        d.ok(&["images", "--format", "{{.Repository}}"])
            .contains("extra")
    );
    // -a: what no container uses goes; busybox stays.
    let out = d.ok(&["image", "prune", "-a", "-f"]);
    assert!(out.contains("extra:1"), "{out}");
    assert_eq!(
        d.ok(&["images", "--format", "{{.Repository}}"]).trim(),
        "busybox",
        "{}",
        d.diagnostics()
    );
    d.fails_saying(
        "a bad time",
        &["image", "prune", "-f", "--filter", "until=soon"],
        "invalid filter 'until=soon'",
    );
    // Times as dockerd reads them: a Go duration before now, a date.
    let out = d.ok(&["image", "prune", "-a", "-f", "--filter", "until=1h"]);
    assert!(out.contains("Total reclaimed space"), "{out}");
    let out = d.ok(&["container", "prune", "-f", "--filter", "until=2000-01-01"]);
    assert!(out.contains("Total reclaimed space: 0B"), "{out}");
    let past = d.http("GET", "/events?since=1h&until=0s", None);
    assert!(
        past.status == 200 && past.body.contains(r#""status":"create""#),
        "the last hour's events, until now: {past:?}"
    );
    d.fails_saying(
        "an unknown prune filter",
        &["image", "prune", "-f", "--filter", "colour=blue"],
        "invalid filter 'colour'",
    );
}

#[test]
fn shared_sizes_count_the_layers_images_have_in_common() {
    let d = Daemon::start();
    d.commit_of_script("head -c 200000 /dev/zero > /made", &[], "made:1");
    let sizes = |path: &str| -> Vec<(String, i64, i64)> {
        let r = d.http("GET", path, None);
        let images = r.json().unwrap_or_default();
        let images = images["Images"]
            .as_array()
            .cloned()
            .or_else(|| images.as_array().cloned());
        images
            .unwrap_or_default()
            .iter()
            .map(|i| {
                (
                    i["RepoTags"][0].as_str().unwrap_or_default().to_owned(),
                    i["Size"].as_i64().unwrap_or(-2),
                    i["SharedSize"].as_i64().unwrap_or(-2),
                )
            })
            .collect()
    };
    let of = |list: &[(String, i64, i64)], tag: &str| {
        list.iter()
            .find(|(t, ..)| t == tag)
            .map(|(_, size, shared)| (*size, *shared))
            .unwrap_or_else(|| panic!("no {tag} in {list:?}"))
    };
    // Not asked: not counted, as dockerd says it (-1).
    let plain = sizes("/images/json");
    assert!(plain.iter().all(|(.., shared)| *shared == -1), "{plain:?}");
    // busybox's layer is made:1's lowest: shared by both; made:1's own
    // layer (what the container wrote) by none.
    let listed = sizes("/images/json?shared-size=1");
    let (busybox, busybox_shared) = of(&listed, "busybox:latest");
    let (made, made_shared) = of(&listed, "made:1");
    assert!(busybox > 0 && made >= busybox + 200_000, "{listed:?}");
    assert_eq!(
        (busybox_shared, made_shared),
        (busybox, busybox),
        "{listed:?}"
    );
    // system df agrees, and counts each layer once.
    let df = d
        .http("GET", "/system/df?type=image", None)
        .json()
        .unwrap_or_default();
    let in_df = sizes("/system/df?type=image");
    assert_eq!(of(&in_df, "busybox:latest"), (busybox, busybox), "{df}");
    assert_eq!(of(&in_df, "made:1"), (made, busybox), "{df}");
    assert_eq!(df["LayersSize"].as_i64(), Some(made), "{df}");
}
