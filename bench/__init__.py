"""Side-by-side benchmarks of Ferry against s5cmd, rclone and the AWS CLI (`make bench`)."""
