def test_servers_answer(versitygw, motoserver):
    for server in (versitygw, motoserver):
        bucket = server.bucket()
        server.client.put_object(Bucket=bucket, Key="k", Body=b"x")
        assert server.keys(bucket) == ["k"]
