def test_servers_answer(versitygw, motoserver):
    for server in (versitygw, motoserver):
        bucket = server.bucket()
        server.client.put_object(Bucket=bucket, Key="k", Body=b"x")
        assert server.keys(bucket) == ["k"]


def test_the_pipelines_moto_s3_lists_versions_whole_while_another_thread_deletes_a_key(pipeline, monkeypatch):
    """S3 answers a listing from one state of the bucket. moto's in-process backend takes a
    snapshot of the key names, then reads each key's versions: a key whose last version
    another thread deletes in between (a mark deleted by version id, as the copies do) comes
    back as None, and the listing fails with a TypeError. The `pipeline` fixture makes each
    listing and each write whole; here the delete is started exactly inside that window."""
    import threading

    from moto.s3.utils import _VersionedKeyStore

    s3 = pipeline.s3
    s3.put_bucket_versioning(Bucket="dst", VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket="dst", Key="a", Body=b"a")
    mark = s3.put_object(Bucket="dst", Key="mark", Body=b"")["VersionId"]
    snapshot = _VersionedKeyStore._self_iterable
    deleted = threading.Event()

    def delete_the_mark() -> None:
        s3.delete_object(Bucket="dst", Key="mark", VersionId=mark)
        deleted.set()

    def snapshot_then_let_the_delete_run(store):
        names = snapshot(store)
        if "mark" in names and not deleted.is_set():
            threading.Thread(target=delete_the_mark).start()
            deleted.wait(0.3)  # whole listings: the delete waits for this one to end
        return names

    monkeypatch.setattr(_VersionedKeyStore, "_self_iterable", snapshot_then_let_the_delete_run)
    listed = s3.list_object_versions(Bucket="dst")
    assert deleted.wait(5.0)
    assert [v["Key"] for v in listed["Versions"]] in (["a"], ["a", "mark"])
    assert [v["Key"] for v in s3.list_object_versions(Bucket="dst")["Versions"]] == ["a"]
