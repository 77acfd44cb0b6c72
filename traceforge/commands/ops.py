"""placeholder"""
import click
@click.command("ops")
def command() -> None:
    """placeholder"""
