from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0015_session_history'),
    ]

    operations = [
        migrations.AddField(
            model_name='session',
            name='browser_available',
            field=models.BooleanField(default=False),
        ),
    ]
