from client.cli.main import app

app(prog_name="sapo")
