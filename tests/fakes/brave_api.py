"""A fake of the Brave Search API's web-search and LLM Context endpoints, on loopback.

Tests and benchmarks point the real SearXNG engine at this server instead of
api.search.brave.com, so they run offline, cost no quota and can provoke errors on demand.
It mimics what the engine has to cope with in real traffic (as recorded real responses
show): parameter validation answered with 422 ``VALIDATION``,
a bad key answered with 422 (not 401), rate-limit headers as comma pairs, no ``web`` key when
nothing is found, ``<strong>`` decorations and HTML entities in descriptions, extra snippets
that sometimes repeat the description, and result languages that follow the locale
parameters roughly the way a real index does.

Results are built from hand-written sentences in English, Polish and French, so an honest
language identifier recognises each result's language. The ranked list for a query is
deterministic: the same query and locale parameters give the same results on every call.

Run it by hand with ``python -m tests.fakes.brave_api --port 8765 --api-key K``.
"""

from __future__ import annotations

import argparse
import base64
import calendar
import gzip
import hashlib
import html
import json
import math
import random
import re
import threading
import time
import unicodedata
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from tests.fakes.loopback import DispatchingHandler, LoopbackFake, LoopbackServer

SEARCH_PATH = "/res/v1/web/search"
CONTEXT_PATH = "/res/v1/llm/context"  # Brave's LLM Context, the same plan and headers
PAGE_SIZE = 20  # the largest page the API serves, and the unit of the language quotas
MAX_OFFSET = 9  # offset is a page index; the API serves at most ten pages
RATE_LIMIT_PER_SECOND = 1  # Free plan numbers, as seen in real headers
MONTHLY_QUOTA = 15000

COUNTRIES = (
    "AR AU AT BE BR CA CL DK FI FR DE HK IN ID IT JP KR MY MX NL NZ NO CN PL PT PH RU SA ZA "
    "ES SE CH TW TR GB US ALL"
).split()
SEARCH_LANGS = (
    "ar eu bn bg ca zh-hans zh-hant hr cs da nl en en-gb et fi fr gl de gu he hi hu is it jp "
    "kn ko lv lt ms ml mr nb pl pt-br pt-pt pa ro ru sr sk sl es sv ta te th tr uk vi"
).split()
SAFESEARCH = ("off", "moderate", "strict")
FRESHNESS_SHORT = ("pd", "pw", "pm", "py")

# Languages the fake has text for, and which countries imply one of them.
CONTENT_LANGS = ("en", "pl", "fr")
COUNTRY_LANG = {"PL": "pl", "FR": "fr"}

# How many of every 20 ranked results are in the target language. Real indexes answer a
# search_lang hint only partly, and a country plus a matching language most strongly.
QUOTA_NONE = 0
QUOTA_COUNTRY = 7
QUOTA_LANG = 10
QUOTA_COUNTRY_AND_LANG = 17


@dataclass
class RecordedRequest:
    """One request as the fake received it, for tests to assert on."""

    path: str
    params: dict[str, str]  # query string, first value of each name
    headers: dict[str, str]  # lower-cased names
    at: float = field(default_factory=time.monotonic)
    """When it arrived (time.monotonic): tests of the pacing read the gaps."""


@dataclass(frozen=True)
class _Failure:
    status: int
    code: str
    detail: str | None


@dataclass(frozen=True)
class _Query:
    """Validated search parameters; None means the client did not send the parameter."""

    q: str
    count: int
    offset: int
    country: str | None
    search_lang: str | None
    ui_lang: str | None
    safesearch: str
    freshness: str | None
    text_decorations: bool
    extra_snippets: bool
    spellcheck: bool


# --------------------------------------------------------------------------------------------
# Text. Sections are "@@ <lang> <topic> <kind>"; one item a line, and a line indented by two
# spaces continues the item above it (keeps sentences whole and lines short). Leads and
# generic sentences fit any topic; "{q}" is replaced by the query, "{Q}" by it capitalised.
# --------------------------------------------------------------------------------------------

_TEXT = """
@@ en * leads
Everything you need to know about {q}, explained step by step and without jargon.
A clear introduction to {q}, with practical examples and the mistakes to avoid.
Looking for answers about {q}? Here is what actually works, tested by real people.
Our team tried {q} in everyday situations and wrote down what we learned.
{Q} is one of the topics our readers ask us about most often.
This page collects the most useful tips about {q} in one place.

@@ en * generic
The article was reviewed by our editors and updated with questions readers asked in the
  comments.
Join the discussion below the article and share your own experience with other readers.
Each section ends with a short summary, so you can come back later and find the key points
  quickly.
We compared several approaches and explain when each of them makes the most sense.

@@ pl * leads
{Q} – wszystko, co warto wiedzieć, wyjaśnione krok po kroku i bez zbędnego żargonu.
Zebraliśmy najważniejsze porady dotyczące zagadnienia „{q}” w jednym miejscu.
Szukasz informacji o tym, czym jest {q}? Oto sprawdzone odpowiedzi i praktyczne przykłady.
Hasło „{q}” należy do tych, o które nasi czytelnicy pytają najczęściej.
Praktyczny przewodnik: {q}. Znajdziesz tu przykłady, typowe błędy i sposoby ich unikania.
Temat „{q}” omawiamy na przykładach, które łatwo powtórzyć samodzielnie w domu.

@@ pl * generic
Artykuł został sprawdzony przez redakcję i uzupełniony o pytania zadawane przez czytelników
  w komentarzach.
Dołącz do dyskusji pod tekstem i podziel się własnymi doświadczeniami z innymi czytelnikami.
Każda część kończy się krótkim podsumowaniem, dzięki któremu łatwo wrócić później do
  najważniejszych informacji.
Porównaliśmy kilka podejść i wyjaśniamy, w jakich sytuacjach każde z nich sprawdza się
  najlepiej.

@@ fr * leads
Tout ce qu'il faut savoir sur {q}, expliqué étape par étape et sans jargon inutile.
Une introduction claire à {q}, avec des exemples concrets et les erreurs à éviter.
Vous cherchez des informations sur {q} ? Voici des réponses vérifiées et des conseils
  pratiques.
Notre rédaction a testé {q} au quotidien et partage ici ses conclusions.
{Q} fait partie des sujets les plus recherchés par nos lecteurs.
Guide pratique : {q}. Vous y trouverez des exemples, les pièges courants et comment les
  éviter.

@@ fr * generic
L'article a été relu par la rédaction et complété avec les questions posées par les lecteurs
  dans les commentaires.
Rejoignez la discussion sous l'article et partagez votre propre expérience avec les autres
  lecteurs.
Chaque partie se termine par un court résumé, pour retrouver rapidement l'essentiel plus tard.
Nous avons comparé plusieurs approches et expliquons dans quels cas chacune est la plus
  adaptée.

@@ en python titles
{q}: a practical guide for beginners
Getting started with {q}: installation and first steps
{q} explained with simple examples
How to set up {q} on Windows, macOS and Linux
Common mistakes with {q} and how to fix them

@@ en python sentences
Python is a general-purpose programming language known for its readable syntax and a huge
  standard library.
Virtual environments keep the dependencies of each project separate, so upgrading one package
  never breaks another application.
With pip you can install thousands of packages from the Python Package Index in a single
  command.
Type hints do not change how the code runs, but they let editors and linters catch many
  mistakes before the program starts.
The asyncio module lets a single thread handle many network connections by switching tasks
  while they wait for data.
List comprehensions, generators and context managers make everyday Python code shorter and
  easier to read.

@@ en python snippets
Start by checking which interpreter is on your path with python --version, then create a
  virtual environment inside the project folder and activate it before installing anything.
Unit tests are easy to write with pytest: a test is just a function whose name starts with
  test, and plain assert statements show a detailed diff when they fail.
When a script grows beyond a few hundred lines, split it into modules and packages so that
  each file has one clear responsibility and can be imported on its own.
Formatting tools remove most style discussions from code review, because the whole team gets
  the same layout automatically on every commit.
Reading a large file line by line with a for loop uses very little memory, since the program
  only keeps the current line instead of loading the whole file at once.
If a program feels slow, measure it first with the built-in profiler; the real bottleneck is
  often a single function that is called far more often than you expected.

@@ pl python titles
{q} – poradnik dla początkujących
{q}: instalacja i pierwsze kroki
Jak zacząć naukę programowania? {q} w praktyce
Najczęstsze błędy: {q} i jak ich unikać
{q} – kurs od podstaw z przykładami

@@ pl python sentences
Python to uniwersalny język programowania, który słynie z czytelnej składni i bardzo bogatej
  biblioteki standardowej.
Środowiska wirtualne oddzielają zależności poszczególnych projektów, dzięki czemu aktualizacja
  jednej paczki nie psuje innej aplikacji.
Za pomocą narzędzia pip można jednym poleceniem zainstalować tysiące gotowych bibliotek
  z repozytorium PyPI.
Adnotacje typów nie zmieniają działania programu, ale pozwalają edytorowi wychwycić wiele
  błędów jeszcze przed uruchomieniem kodu.
Moduł asyncio pozwala jednemu wątkowi obsługiwać wiele połączeń sieciowych, przełączając
  zadania w czasie oczekiwania na dane.
Wyrażenia listowe, generatory i menedżery kontekstu sprawiają, że codzienny kod w Pythonie
  jest krótszy i łatwiejszy do zrozumienia.

@@ pl python snippets
Na początek sprawdź, jaka wersja interpretera jest zainstalowana, wpisując w terminalu
  python --version, a następnie utwórz środowisko wirtualne w katalogu projektu i aktywuj je
  przed instalacją pakietów.
Testy jednostkowe łatwo pisać w bibliotece pytest: test to zwykła funkcja, której nazwa
  zaczyna się od słowa test, a zwykła instrukcja assert pokazuje czytelny opis różnic, gdy coś
  pójdzie nie tak.
Gdy skrypt rozrasta się do kilkuset linii, warto podzielić go na moduły i pakiety, tak aby
  każdy plik miał jedno wyraźne zadanie i dał się zaimportować osobno.
Automatyczne formatowanie kodu kończy większość sporów o styl podczas przeglądu zmian,
  ponieważ cały zespół dostaje ten sam układ przy każdym zatwierdzeniu.
Czytanie dużego pliku linia po linii w pętli zużywa bardzo mało pamięci, bo w danej chwili
  program przechowuje tylko bieżący wiersz zamiast całej zawartości.
Jeśli program działa zbyt wolno, najpierw zmierz jego wydajność wbudowanym profilerem; wąskim
  gardłem często okazuje się jedna funkcja wywoływana znacznie częściej, niż się wydawało.

@@ fr python titles
{q} : guide pratique pour débutants
Débuter avec {q} : installation et premiers pas
{q} expliqué simplement, avec des exemples
Les erreurs courantes avec {q} et comment les corriger
Apprendre {q} pas à pas : le cours complet

@@ fr python sentences
Python est un langage de programmation polyvalent, apprécié pour sa syntaxe lisible et sa
  bibliothèque standard très riche.
Les environnements virtuels isolent les dépendances de chaque projet, ce qui évite qu'une mise
  à jour ne casse une autre application.
Avec pip, on installe en une seule commande n'importe laquelle des milliers de bibliothèques
  publiées sur PyPI.
Les annotations de type ne changent pas l'exécution du programme, mais elles permettent à
  l'éditeur de repérer beaucoup d'erreurs avant le lancement.
Le module asyncio permet à un seul fil d'exécution de gérer de nombreuses connexions réseau en
  passant d'une tâche à l'autre pendant les attentes.
Les compréhensions de liste, les générateurs et les gestionnaires de contexte rendent le code
  quotidien plus court et plus facile à lire.

@@ fr python snippets
Commencez par vérifier la version de l'interpréteur avec la commande python --version, puis
  créez un environnement virtuel dans le dossier du projet et activez-le avant d'installer quoi
  que ce soit.
Les tests unitaires s'écrivent facilement avec pytest : un test est une simple fonction dont
  le nom commence par test, et une instruction assert affiche clairement les différences en cas
  d'échec.
Quand un script dépasse quelques centaines de lignes, il vaut mieux le découper en modules et
  en paquets afin que chaque fichier ait une responsabilité claire.
Les outils de formatage automatique mettent fin à la plupart des débats de style pendant la
  relecture, puisque toute l'équipe obtient la même mise en page à chaque validation.
Lire un gros fichier ligne par ligne dans une boucle consomme très peu de mémoire, car le
  programme ne garde que la ligne en cours au lieu de charger tout le contenu.
Si un programme semble lent, mesurez d'abord ses performances avec le profileur intégré ; le
  vrai goulot d'étranglement est souvent une seule fonction appelée bien plus souvent que prévu.

@@ en docker titles
{q}: containers explained for developers
How to run {q} in production
{q} tutorial: from Dockerfile to deployment
Troubleshooting {q}: the most common errors
Best practices for building {q} images

@@ en docker sentences
Docker packages an application together with its libraries and settings, so it runs the same
  way on a laptop and on a server.
A Dockerfile describes, line by line, how an image is built, and every instruction creates a
  new cached layer.
Compose files let you start a web service, a database and a cache together with a single
  command.
Named volumes keep your data safe when a container is removed, which matters a lot for
  databases.
Multi-stage builds leave compilers and build tools out of the final image, making it smaller
  and safer.
Containers share the kernel of the host, which is why they start in seconds instead of minutes
  like virtual machines.

@@ en docker snippets
If a container exits immediately after starting, run docker logs with its name to see the last
  lines it printed; most of the time the cause is a missing environment variable or a wrong
  command.
Put the instructions that change least often at the top of the Dockerfile, because every layer
  after a modified line has to be rebuilt from scratch.
A health check tells the engine how to test whether the service inside the container is really
  working, and other services can wait until it reports a healthy state.
Never bake passwords or API keys into an image; pass them at runtime as environment variables
  or mount them as secrets, so they do not end up in a public registry.
To see why an image is so large, inspect its history and look for layers that copy the whole
  project folder or leave package manager caches behind.
Containers on the same user-defined network can reach each other by service name, so the
  application can simply connect to a host called db instead of using an address.

@@ pl docker titles
{q} – kontenery w praktyce dla programistów
Jak uruchomić {q} na serwerze produkcyjnym
{q}: od pliku Dockerfile do wdrożenia
Rozwiązywanie problemów: {q} i najczęstsze błędy
Dobre praktyki budowania obrazów – {q}

@@ pl docker sentences
Docker pakuje aplikację razem z bibliotekami i ustawieniami, dzięki czemu działa ona tak samo
  na laptopie, jak i na serwerze.
Plik Dockerfile opisuje krok po kroku, jak zbudować obraz, a każda instrukcja tworzy nową
  warstwę zapisywaną w pamięci podręcznej.
Plik konfiguracyjny Compose pozwala jednym poleceniem uruchomić razem usługę internetową, bazę
  danych i pamięć podręczną.
Nazwane wolumeny chronią dane po usunięciu kontenera, co ma ogromne znaczenie w przypadku baz
  danych.
Budowanie wieloetapowe pozwala zostawić kompilatory i narzędzia poza końcowym obrazem, który
  jest przez to mniejszy i bezpieczniejszy.
Kontenery korzystają z jądra systemu gospodarza, dlatego uruchamiają się w kilka sekund, a nie
  w kilka minut jak maszyny wirtualne.

@@ pl docker snippets
Jeżeli kontener kończy pracę zaraz po starcie, sprawdź jego dziennik poleceniem docker logs;
  najczęściej przyczyną jest brakująca zmienna środowiskowa albo błędnie podane polecenie
  startowe.
Instrukcje, które zmieniają się najrzadziej, umieść na początku pliku, ponieważ każda warstwa
  po zmodyfikowanej linii musi zostać zbudowana od nowa.
Sprawdzanie stanu mówi silnikowi, jak ocenić, czy usługa w kontenerze naprawdę działa,
  a pozostałe usługi mogą poczekać, aż zostanie uznana za zdrową.
Nigdy nie zapisuj haseł ani kluczy dostępowych w obrazie; przekazuj je przy uruchomieniu jako
  zmienne środowiskowe lub sekrety, żeby nie trafiły do publicznego rejestru.
Aby dowiedzieć się, dlaczego obraz jest tak duży, przejrzyj jego historię i poszukaj warstw,
  które kopiują cały katalog projektu albo zostawiają pliki tymczasowe menedżera pakietów.
Kontenery podłączone do tej samej sieci mogą łączyć się ze sobą po nazwie usługi, więc
  aplikacja po prostu łączy się z hostem o nazwie db, bez wpisywania adresu.

@@ fr docker titles
{q} : les conteneurs expliqués aux développeurs
Comment déployer {q} en production
Tutoriel {q} : du Dockerfile au déploiement
Dépannage de {q} : les erreurs les plus fréquentes
Bonnes pratiques pour construire des images {q}

@@ fr docker sentences
Docker regroupe une application avec ses bibliothèques et sa configuration, pour qu'elle
  fonctionne de la même façon sur un portable et sur un serveur.
Un Dockerfile décrit ligne par ligne la construction d'une image, et chaque instruction crée
  une nouvelle couche mise en cache.
Un fichier Compose permet de lancer ensemble un service web, une base de données et un cache
  avec une seule commande.
Les volumes nommés conservent les données lorsqu'un conteneur est supprimé, ce qui est
  essentiel pour une base de données.
La construction en plusieurs étapes laisse les compilateurs hors de l'image finale, qui devient
  ainsi plus légère et plus sûre.
Les conteneurs partagent le noyau de la machine hôte, c'est pourquoi ils démarrent en quelques
  secondes au lieu de plusieurs minutes.

@@ fr docker snippets
Si un conteneur s'arrête juste après son démarrage, consultez ses journaux avec docker logs ;
  la cause la plus fréquente est une variable d'environnement manquante ou une commande de
  lancement erronée.
Placez en haut du fichier les instructions qui changent le moins souvent, car toutes les
  couches situées après une ligne modifiée doivent être reconstruites.
Une vérification de santé indique au moteur comment savoir si le service fonctionne vraiment,
  et les autres services peuvent attendre qu'il soit déclaré opérationnel.
N'inscrivez jamais de mots de passe ni de clés d'accès dans une image ; transmettez-les au
  lancement sous forme de variables d'environnement ou de secrets, afin qu'ils ne se retrouvent
  pas dans un registre public.
Pour comprendre pourquoi une image est si volumineuse, examinez son historique et cherchez les
  couches qui copient tout le dossier du projet ou laissent derrière elles le cache du
  gestionnaire de paquets.
Les conteneurs reliés au même réseau peuvent se joindre par le nom du service, si bien que
  l'application se connecte simplement à l'hôte db sans connaître son adresse.

@@ en linux titles
{q}: a beginner's guide to the command line
How to configure {q} on Ubuntu and Debian
{q} – useful commands every administrator should know
Fixing common {q} problems after an update
{q} explained: users, permissions and services

@@ en linux sentences
Linux is a free operating system kernel that powers most web servers, Android phones and many
  home routers.
File permissions decide who may read, change or run a file, and they are shown as a short
  string of letters in the terminal.
The package manager downloads software from trusted repositories and keeps every installed
  program up to date.
Systemd starts background services when the machine boots and restarts them automatically if
  they crash.
Shell scripts let you automate repetitive tasks, from daily backups to cleaning up old log
  files.
The terminal may look intimidating at first, but a dozen basic commands cover most of the daily
  work.

@@ en linux snippets
To find out which process is using the most memory, open top or htop and sort the list by
  memory usage; pressing k lets you stop a misbehaving program without rebooting.
Scheduled jobs are defined in the crontab, where five fields describe the minute, hour, day of
  month, month and day of week when a command should run.
When a disk fills up unexpectedly, the du command shows which directories take the most space,
  and old journal files are a frequent surprise on long-running servers.
Before editing the configuration files in the etc directory, make a copy of the original, so
  you can always go back if the service refuses to start afterwards.
SSH keys are both safer and more convenient than passwords: generate a key pair once, copy the
  public part to the server and disable password logins completely.
Reading the system journal with journalctl and a service name is usually the quickest way to
  understand why that service failed during startup.

@@ pl linux titles
{q} – podstawy pracy w terminalu dla początkujących
Jak skonfigurować {q} w systemie Ubuntu i Debian
{q}: przydatne polecenia, które powinien znać każdy administrator
Naprawa typowych problemów po aktualizacji – {q}
{q} od podstaw: użytkownicy, uprawnienia i usługi

@@ pl linux sentences
Linux to wolne jądro systemu operacyjnego, na którym działa większość serwerów internetowych,
  telefony z Androidem i wiele domowych routerów.
Uprawnienia do plików określają, kto może je odczytać, zmienić lub uruchomić, a w terminalu
  widać je jako krótki ciąg liter.
Menedżer pakietów pobiera oprogramowanie z zaufanych repozytoriów i dba o to, by wszystkie
  zainstalowane programy były aktualne.
Systemd uruchamia usługi działające w tle podczas startu komputera i automatycznie wznawia je
  po awarii.
Skrypty powłoki pozwalają zautomatyzować powtarzalne czynności, od codziennych kopii
  zapasowych po usuwanie starych dzienników.
Terminal na początku może onieśmielać, ale kilkanaście podstawowych poleceń wystarcza do
  większości codziennej pracy.

@@ pl linux snippets
Aby sprawdzić, który proces zużywa najwięcej pamięci, uruchom program top lub htop i posortuj
  listę według zajętości pamięci; klawisz k pozwala zakończyć niesforny program bez restartu.
Zadania cykliczne definiuje się w pliku crontab, gdzie pięć pól określa minutę, godzinę, dzień
  miesiąca, miesiąc i dzień tygodnia, w których polecenie ma zostać wykonane.
Gdy dysk niespodziewanie się zapełni, polecenie du pokaże, które katalogi zajmują najwięcej
  miejsca; na długo działających serwerach często winne są stare dzienniki systemowe.
Przed edycją plików konfiguracyjnych w katalogu etc zrób kopię oryginału, żeby zawsze móc
  wrócić do poprzedniej wersji, jeśli usługa przestanie się uruchamiać.
Klucze SSH są bezpieczniejsze i wygodniejsze od haseł: wystarczy raz wygenerować parę kluczy,
  skopiować część publiczną na serwer i całkowicie wyłączyć logowanie hasłem.
Przeglądanie dziennika systemowego poleceniem journalctl z nazwą usługi to zwykle najszybszy
  sposób, by zrozumieć, dlaczego nie udało się jej uruchomić.

@@ fr linux titles
{q} : guide du débutant pour la ligne de commande
Comment configurer {q} sous Ubuntu et Debian
{q} – les commandes utiles que tout administrateur devrait connaître
Résoudre les problèmes fréquents après une mise à jour : {q}
{q} expliqué : utilisateurs, droits et services

@@ fr linux sentences
Linux est un noyau de système d'exploitation libre qui fait tourner la plupart des serveurs
  web, les téléphones Android et de nombreuses box internet.
Les droits d'accès déterminent qui peut lire, modifier ou exécuter un fichier, et ils
  apparaissent dans le terminal sous la forme d'une courte suite de lettres.
Le gestionnaire de paquets télécharge les logiciels depuis des dépôts de confiance et maintient
  tous les programmes installés à jour.
Systemd lance les services en arrière-plan au démarrage et les relance automatiquement
  lorsqu'ils plantent.
Les scripts shell permettent d'automatiser les tâches répétitives, de la sauvegarde quotidienne
  au nettoyage des vieux journaux.
Le terminal peut sembler intimidant au début, mais une douzaine de commandes de base suffisent
  pour l'essentiel du travail quotidien.

@@ fr linux snippets
Pour savoir quel processus consomme le plus de mémoire, ouvrez top ou htop et triez la liste
  selon l'utilisation de la mémoire ; la touche k permet d'arrêter un programme récalcitrant
  sans redémarrer.
Les tâches planifiées se définissent dans la crontab, où cinq champs indiquent la minute,
  l'heure, le jour du mois, le mois et le jour de la semaine auxquels la commande doit
  s'exécuter.
Quand un disque se remplit sans prévenir, la commande du montre quels répertoires occupent le
  plus de place ; sur les serveurs qui tournent depuis longtemps, les anciens journaux sont
  souvent en cause.
Avant de modifier les fichiers de configuration du répertoire etc, faites une copie de
  l'original afin de pouvoir revenir en arrière si le service refuse ensuite de démarrer.
Les clés SSH sont à la fois plus sûres et plus pratiques que les mots de passe : générez une
  paire de clés, copiez la partie publique sur le serveur puis désactivez la connexion par mot
  de passe.
Consulter le journal du système avec journalctl suivi du nom du service est généralement le
  moyen le plus rapide de comprendre pourquoi ce service a échoué au démarrage.

@@ en databases titles
{q}: how relational databases really work
Speeding up slow queries – {q} in practice
{q} tutorial: tables, indexes and joins
Choosing between PostgreSQL and MySQL for {q}
Backing up and restoring data with {q}

@@ en databases sentences
A relational database stores data in tables and uses SQL to combine rows from several tables in
  a single query.
An index works like the index at the back of a book: the database can jump straight to the
  matching rows instead of reading every page.
Transactions make sure that a group of changes is either saved completely or not at all, even
  if the server suddenly loses power.
PostgreSQL is an open source database with strong support for JSON columns, full text search
  and custom data types.
Regular backups are only useful if you also practise restoring them on a separate machine from
  time to time.
Normalisation removes duplicated information, while careful denormalisation can make frequent
  reports much faster.

@@ en databases snippets
Prefix a slow query with EXPLAIN ANALYZE to see the plan the database chose; a sequential scan
  over millions of rows usually means an index is missing or cannot be used.
Connection pooling matters for web applications, because opening a new database connection for
  every request costs far more time than running the query itself.
Keep schema changes in versioned migration files stored next to the code, so every developer
  and every server ends up with exactly the same structure.
Foreign keys protect the data from orphaned records: the database simply refuses to delete a
  customer while orders that point to that customer still exist.
For small projects and tests SQLite is often enough, since the whole database lives in one file
  and needs no separate server process.
Parameterised queries keep user input apart from the SQL text itself, which is the simplest and
  most reliable protection against injection attacks.

@@ pl databases titles
{q} – jak naprawdę działają relacyjne bazy danych
Przyspieszanie wolnych zapytań: {q} w praktyce
{q}: tabele, indeksy i złączenia krok po kroku
PostgreSQL czy MySQL? Wybór bazy danych – {q}
Kopie zapasowe i odtwarzanie danych – {q}

@@ pl databases sentences
Relacyjna baza danych przechowuje informacje w tabelach i pozwala za pomocą języka SQL łączyć
  wiersze z wielu tabel w jednym zapytaniu.
Indeks działa jak skorowidz na końcu książki: baza od razu trafia do pasujących wierszy, zamiast
  przeglądać każdą stronę.
Transakcje gwarantują, że grupa zmian zostanie zapisana w całości albo wcale, nawet jeśli
  serwer nagle straci zasilanie.
PostgreSQL to otwarta baza danych, która dobrze radzi sobie z kolumnami JSON, wyszukiwaniem
  pełnotekstowym i własnymi typami danych.
Regularne kopie zapasowe mają sens tylko wtedy, gdy co jakiś czas ćwiczymy ich odtwarzanie na
  osobnej maszynie.
Normalizacja usuwa powielone informacje, a przemyślana denormalizacja potrafi znacznie
  przyspieszyć często generowane raporty.

@@ pl databases snippets
Poprzedź wolne zapytanie poleceniem EXPLAIN ANALYZE, aby zobaczyć plan wybrany przez bazę;
  pełne przeszukiwanie milionów wierszy zwykle oznacza, że brakuje indeksu lub nie da się go
  użyć.
Pula połączeń ma duże znaczenie w aplikacjach internetowych, bo otwarcie nowego połączenia
  z bazą przy każdym żądaniu trwa dłużej niż samo wykonanie zapytania.
Zmiany schematu przechowuj w numerowanych plikach migracji obok kodu, dzięki czemu każdy
  programista i każdy serwer ma dokładnie taką samą strukturę tabel.
Klucze obce chronią dane przed osieroconymi rekordami: baza po prostu nie pozwoli usunąć
  klienta, dopóki istnieją zamówienia, które się do niego odwołują.
W małych projektach i testach często wystarcza SQLite, ponieważ cała baza mieści się w jednym
  pliku i nie wymaga osobnego procesu serwera.
Zapytania z parametrami oddzielają dane wpisane przez użytkownika od treści polecenia SQL, co
  jest najprostszą i najpewniejszą ochroną przed atakami typu wstrzyknięcie.

@@ fr databases titles
{q} : comment fonctionnent vraiment les bases de données relationnelles
Accélérer les requêtes lentes : {q} en pratique
Tutoriel {q} : tables, index et jointures
PostgreSQL ou MySQL ? Bien choisir sa base de données pour {q}
Sauvegarder et restaurer ses données avec {q}

@@ fr databases sentences
Une base de données relationnelle range les informations dans des tables et utilise le langage
  SQL pour combiner des lignes de plusieurs tables dans une même requête.
Un index fonctionne comme celui d'un livre : la base accède directement aux lignes recherchées
  au lieu de parcourir toutes les pages.
Les transactions garantissent qu'un ensemble de modifications est enregistré entièrement ou pas
  du tout, même en cas de coupure de courant.
PostgreSQL est une base de données libre qui gère très bien les colonnes JSON, la recherche en
  texte intégral et les types de données personnalisés.
Des sauvegardes régulières ne servent à rien si l'on ne s'entraîne pas aussi à les restaurer
  sur une autre machine.
La normalisation supprime les informations en double, tandis qu'une dénormalisation réfléchie
  peut rendre les rapports fréquents bien plus rapides.

@@ fr databases snippets
Ajoutez EXPLAIN ANALYZE devant une requête lente pour voir le plan choisi par la base ; un
  parcours séquentiel de millions de lignes signifie souvent qu'un index manque ou ne peut pas
  être utilisé.
Un pool de connexions est important pour les applications web, car ouvrir une nouvelle
  connexion à chaque requête coûte bien plus de temps que l'exécution de la requête elle-même.
Conservez les modifications du schéma dans des fichiers de migration versionnés à côté du code,
  afin que chaque développeur et chaque serveur disposent exactement de la même structure.
Les clés étrangères protègent les données contre les enregistrements orphelins : la base refuse
  tout simplement de supprimer un client tant que des commandes y font référence.
Pour les petits projets et les tests, SQLite suffit souvent, puisque toute la base tient dans un
  seul fichier et ne demande aucun serveur séparé.
Les requêtes paramétrées séparent les données saisies par l'utilisateur du texte SQL lui-même,
  ce qui constitue la protection la plus simple et la plus fiable contre les injections.

@@ en cooking titles
{q}: an easy recipe for the whole family
The best {q} recipe, tested step by step
How to make {q} at home without stress
{q} – tips from experienced home cooks
Quick dinner ideas: {q} in under 30 minutes

@@ en cooking sentences
Homemade dumplings taste best when the dough rests for half an hour under a clean towel before
  you roll it out.
A good soup starts with a slowly simmered stock made from vegetables, a bay leaf and a few
  grains of allspice.
Fresh bread needs only flour, water, salt and yeast, but it also needs patience while the dough
  is rising.
Season the dish at the very end, because the flavours grow stronger as the sauce reduces on the
  stove.
Most cakes turn out better when the butter and the eggs are at room temperature before you start
  mixing.
Leftovers keep well in the fridge for two or three days if you let them cool completely before
  covering them.

@@ en cooking snippets
Knead the dough for at least ten minutes until it feels smooth and springs back when you press
  it with a finger; if it still sticks to your hands, add flour one spoon at a time.
Roast the vegetables in a hot oven until the edges turn brown, then blend them with the stock to
  get a thick, velvety soup without adding any cream.
To check whether a cake is ready, push a wooden skewer into the middle; if it comes out dry,
  take the tin out of the oven and let the cake cool on a rack.
A pinch of salt in sweet dishes and a little sugar in tomato sauce balance the flavours in a way
  most guests notice without being able to say why.
Cooking for a big group is much easier when you prepare the fillings a day earlier and keep them
  in the fridge overnight.
Cast iron pans hold heat very well, so meat gets a crisp brown crust, but they need to be dried
  and lightly oiled after every wash.

@@ pl cooking titles
{q} – prosty przepis dla całej rodziny
Najlepszy przepis: {q} krok po kroku
{q} domowym sposobem – sprawdzone porady
{q} – wskazówki doświadczonych kucharzy
Szybki obiad w 30 minut: {q}

@@ pl cooking sentences
Domowe pierogi smakują najlepiej, gdy ciasto odpocznie pół godziny pod czystą ściereczką przed
  wałkowaniem.
Dobra zupa zaczyna się od wywaru gotowanego powoli na warzywach z dodatkiem liścia laurowego
  i kilku ziaren ziela angielskiego.
Do upieczenia chleba wystarczą mąka, woda, sól i drożdże, ale potrzeba też cierpliwości, gdy
  ciasto rośnie.
Przyprawiaj potrawę dopiero na samym końcu, ponieważ smak staje się wyraźniejszy, gdy sos
  odparowuje na kuchence.
Większość ciast udaje się lepiej, jeśli masło i jajka mają temperaturę pokojową jeszcze przed
  rozpoczęciem mieszania.
Resztki obiadu można spokojnie przechowywać w lodówce przez dwa lub trzy dni, jeśli przed
  przykryciem całkowicie ostygną.

@@ pl cooking snippets
Zagniataj ciasto co najmniej dziesięć minut, aż stanie się gładkie i sprężyste; jeżeli nadal
  klei się do rąk, dodawaj mąkę po jednej łyżce.
Upiecz warzywa w mocno nagrzanym piekarniku, aż ich brzegi się zrumienią, a potem zmiksuj je
  z wywarem, aby uzyskać gęstą, aksamitną zupę bez dodatku śmietany.
Żeby sprawdzić, czy ciasto jest gotowe, wbij w jego środek drewniany patyczek; jeśli wyjdzie
  suchy, wyjmij formę z piekarnika i odstaw ciasto do ostygnięcia na kratce.
Szczypta soli w słodkich deserach i odrobina cukru w sosie pomidorowym równoważą smaki
  w sposób, który goście wyczuwają, choć nie potrafią go nazwać.
Gotowanie dla dużej grupy jest znacznie łatwiejsze, gdy farsz przygotujesz dzień wcześniej
  i zostawisz go na noc w lodówce.
Żeliwne patelnie świetnie trzymają ciepło, więc mięso dostaje chrupiącą skórkę, ale po każdym
  myciu trzeba je wysuszyć i lekko natłuścić.

@@ fr cooking titles
{q} : une recette facile pour toute la famille
La meilleure recette de {q}, testée pas à pas
Comment réussir {q} à la maison
{q} – les astuces des cuisiniers amateurs
Idée de dîner rapide : {q} en moins de 30 minutes

@@ fr cooking sentences
Les raviolis maison sont meilleurs lorsque la pâte repose une demi-heure sous un torchon propre
  avant d'être étalée.
Une bonne soupe commence par un bouillon mijoté longtemps avec des légumes, une feuille de
  laurier et quelques grains de poivre.
Le pain maison ne demande que de la farine, de l'eau, du sel et de la levure, mais il faut aussi
  de la patience pendant que la pâte lève.
Rectifiez l'assaisonnement à la toute fin, car les saveurs se renforcent à mesure que la sauce
  réduit sur le feu.
La plupart des gâteaux réussissent mieux lorsque le beurre et les œufs sont à température
  ambiante avant de commencer.
Les restes se conservent deux ou trois jours au réfrigérateur, à condition de les laisser
  refroidir complètement avant de les couvrir.

@@ fr cooking snippets
Pétrissez la pâte pendant au moins dix minutes, jusqu'à ce qu'elle soit lisse et élastique ; si
  elle colle encore aux mains, ajoutez la farine cuillère par cuillère.
Faites rôtir les légumes dans un four bien chaud jusqu'à ce que les bords dorent, puis mixez-les
  avec le bouillon pour obtenir un velouté épais sans ajouter de crème.
Pour vérifier la cuisson d'un gâteau, plantez une pique en bois au centre ; si elle ressort
  sèche, sortez le moule du four et laissez refroidir sur une grille.
Une pincée de sel dans les desserts et un peu de sucre dans la sauce tomate équilibrent les
  saveurs d'une manière que les invités remarquent sans savoir l'expliquer.
Cuisiner pour un grand groupe devient bien plus simple lorsque l'on prépare la farce la veille
  et qu'on la garde au frais toute la nuit.
Les poêles en fonte gardent très bien la chaleur et donnent à la viande une belle croûte dorée,
  mais il faut les sécher et les huiler légèrement après chaque lavage.

@@ en travel titles
{q}: a complete travel guide
What to see and do – {q} for first-time visitors
{q} on a budget: tips from seasoned travellers
Planning a weekend trip: {q}
{q} – where to stay, what to eat and how to get around

@@ en travel sentences
The old town is best explored on foot early in the morning, before the tour groups start to
  arrive.
Booking train tickets a few weeks ahead is usually much cheaper than buying them at the station
  on the day.
Mountain weather changes quickly, so pack a waterproof jacket even when the forecast looks
  perfect.
Small family-run guesthouses often serve a better breakfast than the big hotels in the city
  centre.
Many museums offer free entry on one day of the month, which is worth checking before you plan
  the trip.
Travel insurance costs little compared with the bill for a single night in a foreign hospital.

@@ en travel snippets
Arrive at the viewpoint about half an hour before sunset; the light over the rooftops is
  beautiful and the crowds usually leave as soon as the sun goes down.
Local markets are a great place for a cheap lunch, and stallholders are often happy to explain
  which regional dishes you should try before going home.
On longer hikes, tell someone at your accommodation which trail you plan to take and when you
  expect to be back, especially outside the summer season.
A simple phrasebook or an offline translation app helps a lot in smaller towns, where fewer
  people speak English than in the capital.
Keep digital copies of your passport and bookings in your email, so you can still prove who you
  are if your bag goes missing.
Travelling in late spring or early autumn means milder weather, shorter queues and noticeably
  lower prices for flights and rooms.

@@ pl travel titles
{q} – kompletny przewodnik dla podróżnych
Co warto zobaczyć? {q} dla osób, które jadą tam pierwszy raz
{q} tanim kosztem – porady doświadczonych turystów
Planujesz weekendowy wyjazd? {q}
{q}: gdzie spać, co zjeść i jak się poruszać

@@ pl travel sentences
Stare miasto najlepiej zwiedzać pieszo wcześnie rano, zanim pojawią się wycieczki autokarowe.
Bilety kolejowe kupione kilka tygodni wcześniej są zwykle dużo tańsze niż te kupowane w kasie
  na dworcu.
Pogoda w górach zmienia się bardzo szybko, więc zabierz kurtkę przeciwdeszczową nawet przy
  idealnej prognozie.
Małe pensjonaty prowadzone przez rodziny często podają lepsze śniadania niż duże hotele
  w centrum miasta.
Wiele muzeów oferuje bezpłatny wstęp w jeden dzień w miesiącu, więc warto to sprawdzić przed
  zaplanowaniem wyjazdu.
Ubezpieczenie podróżne kosztuje niewiele w porównaniu z rachunkiem za jedną noc w zagranicznym
  szpitalu.

@@ pl travel snippets
Na punkt widokowy przyjdź mniej więcej pół godziny przed zachodem słońca; światło nad dachami
  jest wtedy przepiękne, a tłum zwykle rozchodzi się zaraz po zmroku.
Lokalne targowiska to świetne miejsce na tani obiad, a sprzedawcy chętnie podpowiadają, których
  regionalnych potraw koniecznie trzeba spróbować przed powrotem do domu.
Przed dłuższą wędrówką powiedz gospodarzom, którym szlakiem zamierzasz iść i o której planujesz
  wrócić, zwłaszcza poza sezonem letnim.
Proste rozmówki albo aplikacja do tłumaczenia działająca bez internetu bardzo pomagają
  w mniejszych miejscowościach, gdzie mniej osób mówi po angielsku.
Trzymaj cyfrowe kopie paszportu i rezerwacji w poczcie elektronicznej, żeby móc potwierdzić
  swoją tożsamość, nawet gdy zaginie bagaż.
Podróż późną wiosną lub wczesną jesienią oznacza łagodniejszą pogodę, krótsze kolejki i wyraźnie
  niższe ceny biletów lotniczych oraz noclegów.

@@ fr travel titles
{q} : le guide de voyage complet
Que voir et que faire ? {q} pour une première visite
{q} sans se ruiner : les conseils de voyageurs expérimentés
Organiser un week-end : {q}
{q} – où dormir, où manger et comment se déplacer

@@ fr travel sentences
La vieille ville se découvre de préférence à pied, tôt le matin, avant l'arrivée des groupes de
  touristes.
Réserver ses billets de train quelques semaines à l'avance coûte généralement bien moins cher
  que de les acheter au guichet.
En montagne, la météo change très vite : emportez une veste imperméable même lorsque les
  prévisions semblent parfaites.
Les petites maisons d'hôtes tenues par des familles servent souvent un meilleur petit-déjeuner
  que les grands hôtels du centre-ville.
Beaucoup de musées sont gratuits un jour par mois, ce qui vaut la peine d'être vérifié avant
  d'organiser le séjour.
Une assurance voyage coûte peu par rapport à la facture d'une seule nuit dans un hôpital
  à l'étranger.

@@ fr travel snippets
Arrivez au belvédère environ une demi-heure avant le coucher du soleil ; la lumière sur les
  toits est magnifique et la foule repart généralement dès que le soleil disparaît.
Les marchés locaux sont parfaits pour un déjeuner bon marché, et les commerçants expliquent
  volontiers quelles spécialités régionales il faut goûter avant de rentrer.
Avant une longue randonnée, indiquez à votre hébergeur quel sentier vous comptez emprunter et
  à quelle heure vous pensez revenir, surtout hors saison.
Un petit guide de conversation ou une application de traduction hors ligne rend de grands
  services dans les petites villes, où l'on parle moins l'anglais que dans la capitale.
Gardez des copies numériques de votre passeport et de vos réservations dans votre messagerie,
  pour pouvoir prouver votre identité même si votre sac disparaît.
Voyager à la fin du printemps ou au début de l'automne, c'est profiter d'un temps plus doux, de
  files d'attente plus courtes et de prix nettement plus bas.

@@ en running titles
{q}: a training plan for beginners
How to start with {q} and keep going
{q} – advice from coaches and physiotherapists
Preparing for your first race: {q}
{q} without injuries: what every runner should know

@@ en running sentences
Beginners should alternate one minute of running with two minutes of walking and slowly extend
  the running parts over several weeks.
Most running injuries come from increasing the weekly distance too quickly rather than from the
  shoes you wear.
An easy run should feel relaxed enough that you can still hold a conversation without gasping
  for air.
Strength exercises for the hips and calves twice a week make the legs more resistant to overuse
  injuries.
Sleep and rest days are part of the training plan, because the body adapts to the effort while
  it recovers.
Drinking a glass of water every hour on a hot day helps more than drinking a whole bottle right
  before the run.

@@ en running snippets
A popular rule says you should not raise your weekly distance by more than about ten percent,
  and every third or fourth week should be lighter to let the body catch up.
Before a race, do not try anything new: eat the breakfast you know, wear shoes you have already
  run in and start more slowly than you feel you could.
Interval training, such as six fast repetitions of four hundred metres with a slow jog in
  between, improves speed much faster than running every session at the same pace.
If a pain gets worse while you run or changes the way you move, stop the session and give it a
  few days; running through it usually turns a small problem into a long break.
Running in a group or with a friend makes it far easier to get out of the house on dark winter
  evenings, when motivation tends to disappear.
A short warm-up with leg swings, skipping and a few gentle accelerations prepares the muscles
  and joints better than static stretching before you start.

@@ pl running titles
{q} – plan treningowy dla początkujących
Jak zacząć i nie zrezygnować po tygodniu? {q}
{q}: porady trenerów i fizjoterapeutów
Przygotowanie do pierwszych zawodów – {q}
{q} bez kontuzji – co powinien wiedzieć każdy biegacz

@@ pl running sentences
Początkujący powinni przeplatać minutę biegu z dwiema minutami marszu i stopniowo wydłużać
  odcinki biegowe przez kilka tygodni.
Większość kontuzji biegowych wynika ze zbyt szybkiego zwiększania tygodniowego kilometrażu,
  a nie z wyboru butów.
Spokojny bieg powinien być na tyle swobodny, żeby można było prowadzić rozmowę bez łapania
  oddechu.
Ćwiczenia wzmacniające biodra i łydki wykonywane dwa razy w tygodniu sprawiają, że nogi są
  odporniejsze na przeciążenia.
Sen i dni odpoczynku to część planu treningowego, ponieważ organizm przystosowuje się do
  wysiłku właśnie podczas regeneracji.
W upalny dzień szklanka wody co godzinę pomaga bardziej niż wypicie całej butelki tuż przed
  wyjściem na trening.

@@ pl running snippets
Popularna zasada mówi, że tygodniowy kilometraż nie powinien rosnąć o więcej niż około dziesięć
  procent, a co trzeci lub czwarty tydzień warto zrobić lżejszy, żeby organizm nadążył.
Przed zawodami nie próbuj niczego nowego: zjedz sprawdzone śniadanie, załóż buty, w których już
  biegałeś, i zacznij wolniej, niż podpowiada ci ochota.
Trening interwałowy, na przykład sześć szybkich odcinków po czterysta metrów przeplatanych
  truchtem, poprawia szybkość dużo skuteczniej niż bieganie każdego treningu w tym samym tempie.
Jeśli ból narasta w trakcie biegu albo zmienia sposób, w jaki się poruszasz, przerwij trening
  i odpocznij kilka dni; bieganie na siłę zwykle zamienia drobny problem w długą przerwę.
Bieganie w grupie albo ze znajomym bardzo ułatwia wyjście z domu w ciemne zimowe wieczory,
  kiedy motywacja najczęściej znika.
Krótka rozgrzewka z wymachami nóg, skipami i kilkoma łagodnymi przyspieszeniami lepiej
  przygotowuje mięśnie i stawy niż statyczne rozciąganie przed startem.

@@ fr running titles
{q} : un programme d'entraînement pour débutants
Comment se lancer et tenir sur la durée : {q}
{q} – les conseils des entraîneurs et des kinésithérapeutes
Préparer sa première course : {q}
{q} sans blessure : ce que tout coureur devrait savoir

@@ fr running sentences
Les débutants devraient alterner une minute de course et deux minutes de marche, puis allonger
  peu à peu les phases de course sur plusieurs semaines.
La plupart des blessures viennent d'une augmentation trop rapide du kilométrage hebdomadaire
  plutôt que du choix des chaussures.
Une sortie facile doit rester assez détendue pour que vous puissiez tenir une conversation sans
  être essoufflé.
Des exercices de renforcement des hanches et des mollets deux fois par semaine rendent les
  jambes plus résistantes aux blessures de surmenage.
Le sommeil et les jours de repos font partie du programme, car le corps s'adapte à l'effort
  pendant la récupération.
Par forte chaleur, boire un verre d'eau toutes les heures aide davantage que d'avaler une
  bouteille entière juste avant de partir courir.

@@ fr running snippets
Une règle répandue conseille de ne pas augmenter le kilométrage hebdomadaire de plus de dix pour
  cent environ, et de prévoir une semaine plus légère toutes les trois ou quatre semaines.
Avant une course, ne tentez rien de nouveau : prenez le petit-déjeuner habituel, portez des
  chaussures déjà rodées et partez plus lentement que ce que vous pensez pouvoir tenir.
Le fractionné, par exemple six répétitions rapides de quatre cents mètres entrecoupées de
  trottinement, améliore la vitesse bien plus vite que de courir toujours à la même allure.
Si une douleur s'aggrave pendant la course ou modifie votre foulée, arrêtez la séance et
  accordez-vous quelques jours ; insister transforme souvent un petit souci en longue pause.
Courir en groupe ou avec un ami aide énormément à sortir de chez soi les soirs d'hiver, quand la
  motivation a tendance à disparaître.
Un court échauffement avec des balancements de jambes, des montées de genoux et quelques
  accélérations progressives prépare mieux les muscles que les étirements statiques.

@@ en gardening titles
{q}: a gardening guide for every season
How to grow {q} in a small garden or on a balcony
{q} – mistakes beginner gardeners make
Planting calendar: {q} month by month
{q} without chemicals: natural ways to healthy plants

@@ en gardening sentences
Tomatoes need at least six hours of direct sun a day and a sheltered spot away from cold winds.
Compost made from kitchen scraps and fallen leaves gives the soil nutrients and helps it hold
  water.
Water the garden early in the morning, so the leaves dry quickly and fungal diseases have less
  chance to spread.
A thick layer of mulch around the plants keeps weeds down and stops the soil from drying out in
  summer.
Many herbs, such as thyme and rosemary, grow happily in pots on a sunny windowsill all year
  round.
Late autumn is a good time to plant fruit trees, because their roots can settle before the
  ground freezes.

@@ en gardening snippets
Sow seeds indoors about six to eight weeks before the last expected frost, and move the
  seedlings outside gradually, leaving them out a little longer each day for a week.
Rotating crops every year, so that the same family of vegetables never grows in the same bed
  twice in a row, reduces pests and keeps the soil in better condition.
Ladybirds and lacewings eat huge numbers of aphids, so a few flowering plants that attract them
  often work better than any spray you could buy.
Prune roses in early spring, just as the buds begin to swell, cutting above an outward-facing
  bud so the new stems grow away from the centre of the bush.
A simple soil test from a garden centre tells you whether the ground is acidic or alkaline,
  which explains why some plants struggle while others thrive.
Collecting rainwater in a barrel under the gutter saves money and gives plants softer water than
  the tap, especially during long dry spells.

@@ pl gardening titles
{q} – poradnik ogrodniczy na każdą porę roku
Uprawa w małym ogrodzie lub na balkonie: {q}
{q}: błędy, które popełniają początkujący ogrodnicy
Kalendarz ogrodnika – {q} miesiąc po miesiącu
{q} bez chemii: naturalne sposoby na zdrowe rośliny

@@ pl gardening sentences
Pomidory potrzebują co najmniej sześciu godzin bezpośredniego słońca dziennie i osłoniętego
  miejsca z dala od zimnego wiatru.
Kompost z resztek kuchennych i opadłych liści dostarcza glebie składników odżywczych i pomaga
  jej zatrzymywać wodę.
Ogród najlepiej podlewać wcześnie rano, żeby liście szybko wyschły, a choroby grzybowe miały
  mniejsze szanse na rozwój.
Gruba warstwa ściółki wokół roślin ogranicza wzrost chwastów i chroni glebę przed wysychaniem
  w czasie lata.
Wiele ziół, takich jak tymianek i rozmaryn, świetnie rośnie w doniczkach na słonecznym
  parapecie przez cały rok.
Późna jesień to dobry moment na sadzenie drzew owocowych, bo zdążą się one ukorzenić, zanim
  ziemia zamarznie.

@@ pl gardening snippets
Nasiona wysiewaj w domu na sześć do ośmiu tygodni przed ostatnimi przymrozkami, a rozsadę
  wynoś na zewnątrz stopniowo, zostawiając ją każdego dnia trochę dłużej przez cały tydzień.
Coroczne zmianowanie upraw, tak aby warzywa z tej samej rodziny nie rosły dwa lata z rzędu na
  tej samej grządce, ogranicza szkodniki i utrzymuje glebę w lepszej kondycji.
Biedronki i złotooki zjadają ogromne ilości mszyc, dlatego kilka kwitnących roślin, które je
  przyciągają, często działa lepiej niż jakikolwiek oprysk ze sklepu.
Róże przycinaj wczesną wiosną, gdy pąki zaczynają nabrzmiewać, tnąc nad pąkiem skierowanym na
  zewnątrz, aby nowe pędy rosły w stronę od środka krzewu.
Prosty test gleby kupiony w centrum ogrodniczym pokaże, czy ziemia jest kwaśna czy zasadowa, co
  wyjaśnia, dlaczego jedne rośliny marnieją, a inne rosną bujnie.
Zbieranie deszczówki do beczki pod rynną pozwala zaoszczędzić pieniądze i daje roślinom miększą
  wodę niż ta z kranu, zwłaszcza podczas długiej suszy.

@@ fr gardening titles
{q} : le guide du jardinier pour chaque saison
Cultiver dans un petit jardin ou sur un balcon : {q}
{q} – les erreurs des jardiniers débutants
Calendrier des plantations : {q} mois par mois
{q} sans produits chimiques : des solutions naturelles

@@ fr gardening sentences
Les tomates ont besoin d'au moins six heures de soleil direct par jour et d'un coin abrité des
  vents froids.
Le compost fait d'épluchures et de feuilles mortes nourrit la terre et l'aide à retenir l'eau.
Arrosez le jardin tôt le matin, afin que les feuilles sèchent vite et que les maladies dues aux
  champignons se propagent moins.
Une épaisse couche de paillage autour des plantes limite les mauvaises herbes et empêche la
  terre de se dessécher en été.
Beaucoup d'herbes aromatiques, comme le thym et le romarin, poussent très bien en pot sur un
  rebord de fenêtre ensoleillé.
La fin de l'automne est un bon moment pour planter des arbres fruitiers, car leurs racines
  s'installent avant que le sol ne gèle.

@@ fr gardening snippets
Semez à l'intérieur six à huit semaines avant les dernières gelées, puis habituez les jeunes
  plants à l'extérieur progressivement, en les sortant un peu plus longtemps chaque jour pendant
  une semaine.
Faire tourner les cultures chaque année, pour qu'une même famille de légumes ne pousse jamais
  deux fois de suite dans la même planche, réduit les ravageurs et garde la terre en meilleure
  santé.
Les coccinelles et les chrysopes dévorent d'énormes quantités de pucerons ; quelques plantes
  fleuries qui les attirent fonctionnent souvent mieux que n'importe quel traitement du
  commerce.
Taillez les rosiers au début du printemps, quand les bourgeons commencent à gonfler, en coupant
  au-dessus d'un œil tourné vers l'extérieur pour que les nouvelles tiges s'écartent du centre.
Un simple test de sol acheté en jardinerie indique si la terre est acide ou calcaire, ce qui
  explique pourquoi certaines plantes végètent alors que d'autres prospèrent.
Récupérer l'eau de pluie dans un tonneau sous la gouttière permet de faire des économies et
  offre aux plantes une eau plus douce que celle du robinet, surtout pendant les longues
  sécheresses.
"""

# Query words (compared without accents) that make the fake "index" favour a topic.
_TOPIC_KEYWORDS: dict[str, frozenset[str]] = {
    "python": frozenset(
        "python pythona pythonie pip django flask asyncio pytest virtualenv venv".split()
    ),
    "docker": frozenset(
        "docker dockera dockerfile compose container containers kontener kontenery "
        "kontenerow conteneur conteneurs kubernetes podman image obraz".split()
    ),
    "linux": frozenset(
        "linux linuxa linuxie ubuntu debian fedora arch bash shell terminal systemd ssh cron "
        "crontab".split()
    ),
    "databases": frozenset(
        "sql postgres postgresql mysql mariadb sqlite database databases baza bazy danych "
        "donnees index indeks indeksy query zapytanie requete".split()
    ),
    "cooking": frozenset(
        "recipe recipes przepis przepisy recette recettes pierogi zupa soup soupe cooking "
        "gotowanie cuisine bread chleb pain ciasto gateau cake dumplings crepes nalesniki".split()
    ),
    "travel": frozenset(
        "travel trip podroz podroze wakacje wycieczka voyage vacances hotel flight lot vol "
        "tatry alpes zakopane paris krakow weekend city miasto ville".split()
    ),
    "running": frozenset(
        "running run runner marathon maraton bieganie biegacz bieg trening training course "
        "entrainement jogging fitness polmaraton semi".split()
    ),
    "gardening": frozenset(
        "garden gardening ogrod ogrodnictwo dzialka jardin jardinage tomato tomatoes pomidory "
        "tomates roses roze compost kompost rosliny plants plantes".split()
    ),
}
_TECH_TOPICS = frozenset({"python", "docker", "linux", "databases"})


@dataclass(frozen=True)
class _Site:
    domain: str
    name: str
    topics: frozenset[str]  # empty means "any topic"
    path: str  # format string: {slug} {under} {wiki} {num} {hex} {short} {topic} {y} {m} {d}
    once: bool = False  # at most one result per ranked list (e.g. an encyclopedia article)


def _site(domain: str, name: str, topics: str, path: str, once: bool = False) -> _Site:
    picked = {"tech": _TECH_TOPICS, "life": set(_TOPIC_KEYWORDS) - _TECH_TOPICS}.get(topics)
    return _Site(domain, name, frozenset(picked or topics.split()), path, once)


# Real, well-known sites per language so that domains look like search results would; the
# paths are invented.
_SITES: dict[str, tuple[_Site, ...]] = {
    "en": (
        _site("en.wikipedia.org", "Wikipedia", "", "/wiki/{wiki}", once=True),
        _site("stackoverflow.com", "Stack Overflow", "tech", "/questions/{num}/{slug}"),
        _site("medium.com", "Medium", "", "/@{author}/{slug}-{hex}"),
        _site("dev.to", "DEV Community", "tech", "/{author}/{slug}-{short}"),
        _site("www.digitalocean.com", "DigitalOcean", "tech", "/community/tutorials/{slug}"),
        _site("www.freecodecamp.org", "freeCodeCamp", "tech", "/news/{slug}/"),
        _site("www.howtogeek.com", "How-To Geek", "tech", "/{num}/{slug}/"),
        _site("www.reddit.com", "Reddit", "", "/r/{topic}/comments/{short}/{under}/"),
        _site("www.theguardian.com", "The Guardian", "life", "/lifeandstyle/{y}/{m}/{d}/{slug}"),
        _site("www.bbcgoodfood.com", "BBC Good Food", "cooking", "/recipes/{slug}"),
        _site("www.allrecipes.com", "Allrecipes", "cooking", "/recipe/{num}/{slug}/"),
        _site("www.lonelyplanet.com", "Lonely Planet", "travel", "/articles/{slug}"),
        _site("www.runnersworld.com", "Runner's World", "running", "/training/a{num}/{slug}/"),
        _site("www.gardenersworld.com", "Gardeners' World", "gardening", "/how-to/{slug}/"),
    ),
    "pl": (
        _site("pl.wikipedia.org", "Wikipedia, wolna encyklopedia", "", "/wiki/{wiki}", True),
        _site("www.dobreprogramy.pl", "dobreprogramy", "tech", "/{slug},{num}.html"),
        _site("forum.pasja-informatyki.pl", "Pasja Informatyki", "tech", "/{num}/{slug}"),
        _site("bulldogjob.pl", "Bulldogjob", "tech", "/readme/{slug}"),
        _site("www.komputerswiat.pl", "Komputer Świat", "tech", "/poradniki/{slug}/{short}"),
        _site("sekurak.pl", "Sekurak", "tech", "/{slug}/"),
        _site("www.benchmark.pl", "Benchmark.pl", "tech", "/aktualnosci/{slug}.html"),
        _site("www.wykop.pl", "Wykop", "", "/link/{num}/{slug}/"),
        _site("www.kwestiasmaku.com", "Kwestia Smaku", "cooking", "/przepis/{slug}"),
        _site("www.przepisy.pl", "Przepisy.pl", "cooking", "/przepis/{slug}-{num}"),
        _site("podroze.onet.pl", "Onet Podróże", "travel", "/{slug}/{short}"),
        _site("www.polskieszlaki.pl", "Polskie Szlaki", "travel", "/{slug}.html"),
        _site("bieganie.pl", "Bieganie.pl", "running", "/trening/{slug}/"),
        _site("www.e-ogrodek.pl", "e-ogrodek", "gardening", "/{slug}-{num}"),
        _site("muratordom.pl", "Murator Dom", "gardening", "/ogrod/{slug}-aa-{short}.html"),
    ),
    "fr": (
        _site("fr.wikipedia.org", "Wikipédia", "", "/wiki/{wiki}", once=True),
        _site("openclassrooms.com", "OpenClassrooms", "tech", "/fr/courses/{num}-{slug}"),
        _site("www.commentcamarche.net", "CommentCaMarche", "tech", "/informatique/{num}-{slug}/"),
        _site("linuxfr.org", "LinuxFr.org", "tech", "/news/{slug}"),
        _site("www.it-connect.fr", "IT-Connect", "tech", "/{slug}/"),
        _site("www.developpez.net", "Developpez.net", "tech", "/forums/d{num}/{slug}/"),
        _site("www.lemonde.fr", "Le Monde", "life", "/vous/article/{y}/{m}/{d}/{slug}_{num}.html"),
        _site("www.marmiton.org", "Marmiton", "cooking", "/recettes/recette_{under}_{num}.aspx"),
        _site(
            "cuisine.journaldesfemmes.fr", "Journal des Femmes", "cooking", "/recette/{num}-{slug}"
        ),
        _site("www.routard.com", "Le Routard", "travel", "/fr/guide/{slug}"),
        _site("www.lequipe.fr", "L'Équipe", "running", "/Running/Article/{slug}/{num}"),
        _site("www.jardiner-malin.fr", "Jardiner Malin", "gardening", "/fiche/{slug}.html"),
        _site("www.rustica.fr", "Rustica", "gardening", "/articles-jardin/{slug},{num}.html"),
    ),
}
_AUTHORS = ("kasia.dev", "tomwrites", "jmartin", "anna-k", "codewithlena", "p.nowak", "remi.b")


@dataclass(frozen=True)
class _Pieces:
    titles: tuple[str, ...]
    sentences: tuple[str, ...]
    snippets: tuple[str, ...]


def _parse_text(text: str) -> dict[tuple[str, str, str], tuple[str, ...]]:
    """Split _TEXT into its sections; see the comment above _TEXT for the format."""
    sections: dict[tuple[str, str, str], list[str]] = {}
    items: list[str] = []
    for line in text.splitlines():
        if line.startswith("@@ "):
            lang, topic, kind = line[3:].split()
            items = sections.setdefault((lang, topic, kind), [])
        elif line.startswith("  "):
            items[-1] += " " + line.strip()
        elif line.strip():
            items.append(line.strip())
    return {key: tuple(value) for key, value in sections.items()}


_SECTIONS = _parse_text(_TEXT)
_CONTENT: dict[str, dict[str, _Pieces]] = {
    lang: {
        topic: _Pieces(
            _SECTIONS[(lang, topic, "titles")],
            _SECTIONS[(lang, topic, "sentences")],
            _SECTIONS[(lang, topic, "snippets")],
        )
        for topic in _TOPIC_KEYWORDS
    }
    for lang in CONTENT_LANGS
}
_LEADS = {lang: _SECTIONS[(lang, "*", "leads")] for lang in CONTENT_LANGS}
_GENERIC = {lang: _SECTIONS[(lang, "*", "generic")] for lang in CONTENT_LANGS}


# --------------------------------------------------------------------------------------------
# Building the ranked list
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    """One ranked result before the request's rendering options are applied."""

    lang: str
    title: str
    url: str
    site: _Site
    description: str  # plain text
    strong: tuple[int, int]  # span of the description that text decorations wrap in <strong>
    escape_entities: bool  # the real API sometimes sends ' as &#x27;
    page_age: str | None
    age: str | None
    thumbnail: str | None  # original image URL
    snippets: tuple[str, ...] | None  # None: this page has no extra snippets even when asked


def _fold(text: str) -> str:
    """Lower-case ASCII form, for keyword matching and URL slugs."""
    text = text.replace("ł", "l").replace("Ł", "L").replace("œ", "oe")
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


@lru_cache(maxsize=4096)
def _slug(text: str, sep: str = "-", suffix: int = 0) -> str:
    """ASCII slug of at most ~70 characters; `suffix` (when not 0) keeps URLs unique."""
    slug = sep.join(re.findall(r"[a-z0-9]+", _fold(text)))[:70].strip(sep) or "page"
    return f"{slug}{sep}{suffix}" if suffix else slug


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _topics_for(q: str) -> list[str]:
    words = set(re.findall(r"[a-z0-9]+", _fold(q)))
    return [topic for topic, keys in _TOPIC_KEYWORDS.items() if words & keys]


def _target_language(country: str | None, search_lang: str | None) -> tuple[str, int]:
    """The language the locale asks for, and how many of every 20 results are in it."""
    from_country = COUNTRY_LANG.get((country or "").upper())
    if search_lang:
        lang = search_lang.split("-")[0]
        if lang not in CONTENT_LANGS or lang == "en":
            return "en", QUOTA_NONE
        return lang, QUOTA_COUNTRY_AND_LANG if from_country == lang else QUOTA_LANG
    if from_country:
        return from_country, QUOTA_COUNTRY
    return "en", QUOTA_NONE


_AGE_UNITS = (
    ("minute", 60, 3600),
    ("hour", 3600, 86400),
    ("day", 86400, 7 * 86400),
    ("week", 7 * 86400, 30 * 86400),
)  # (unit, its length, used below this age)


def _human_age(delta: timedelta, when: datetime) -> str:
    """Brave's "age": relative for recent pages, a plain date for older ones."""
    seconds = int(delta.total_seconds())
    for unit, size, below in _AGE_UNITS:
        if seconds < below:
            n = max(1, seconds // size)
            return f"{n} {unit}{'' if n == 1 else 's'} ago"
    return f"{calendar.month_name[when.month]} {when.day}, {when.year}"


def _pick_date(
    rng: random.Random, freshness: str | None, now: datetime
) -> tuple[str | None, str | None]:
    """page_age and age for one result; every result is dated when freshness filters."""
    day = 86400
    if freshness is None:
        if rng.random() < 0.2:
            return None, None
        span = (60, 7 * day) if rng.random() < 0.15 else (8 * day, 1200 * day)
        when = now - timedelta(seconds=rng.randint(*span))
    elif freshness in FRESHNESS_SHORT:
        limit = {"pd": day, "pw": 7 * day, "pm": 31 * day, "py": 365 * day}[freshness]
        when = now - timedelta(seconds=rng.randint(60, limit - 60))
    else:
        start_s, end_s = freshness.split("to")
        start = datetime.fromisoformat(start_s).replace(tzinfo=UTC)
        end = min(datetime.fromisoformat(end_s).replace(tzinfo=UTC) + timedelta(days=1), now)
        end = max(end, start + timedelta(minutes=1))
        when = start + timedelta(seconds=rng.randint(0, int((end - start).total_seconds()) - 1))
    return when.strftime("%Y-%m-%dT%H:%M:%S"), _human_age(now - when, when)


def _make_url(
    rng: random.Random, site: _Site, title: str, topic: str, q: str, when: date, attempt: int
) -> str:
    path = site.path.format(
        slug=_slug(title, "-", attempt),
        under=_slug(title, "_", attempt),
        wiki=quote(_capitalise(q.strip()).replace(" ", "_")),
        num=rng.randint(1_000_000, 79_999_999),
        hex=f"{rng.getrandbits(48):012x}",
        short=f"{rng.getrandbits(24):06x}",
        topic=topic,
        author=rng.choice(_AUTHORS),
        y=when.year,
        m=f"{when.month:02d}",
        d=f"{when.day:02d}",
    )
    return f"https://{site.domain}{path}"


def _description(
    rng: random.Random, lang: str, pieces: _Pieces, q: str
) -> tuple[str, tuple[int, int], list[str]]:
    """1-2 sentences, usually one of them naming the query, plus the span to emphasise."""
    first = rng.choice(pieces.sentences)
    if rng.random() < 0.75:
        lead = rng.choice(_LEADS[lang]).format(q=q, Q=_capitalise(q))
        parts = [lead, first] if rng.random() < 0.5 else [first, lead]
    else:
        others = [s for s in pieces.sentences if s != first] + list(_GENERIC[lang])
        parts = [first, rng.choice(others)]
    text = " ".join(parts)
    # Like the real API: bold the query where it occurs, otherwise a phrase of the text.
    match = None
    if rng.random() < 0.7:
        words = [re.escape(w) for w in q.split() if len(w) > 2] or [re.escape(q)]
        match = re.search(r"\b(" + "|".join(words) + r")\b", text, re.IGNORECASE)
    if match:
        span = match.span()
    else:
        start = text.index(first)
        span = (start, start + len(first) - 1)  # the sentence without its final stop
    return text, span, parts


def _extra_snippets(
    rng: random.Random, lang: str, pieces: _Pieces, description: str, used: list[str]
) -> tuple[str, ...]:
    """3-5 passages from the page; sometimes one repeats the description or another passage."""
    pool = list(pieces.snippets) + [s for s in pieces.sentences if s not in used]
    pool += list(_GENERIC[lang])
    rng.shuffle(pool)
    snippets: list[str] = []
    for _ in range(rng.randint(3, 5)):
        if not pool:
            break
        text = pool.pop()
        while len(text) < 150 and pool:
            text += " " + pool.pop()
        snippets.append(text)
    roll = rng.random()
    if roll < 0.08:
        snippets[rng.randrange(len(snippets))] = description
    elif roll < 0.13:
        snippets.append(rng.choice(snippets))
    return tuple(snippets)


def _entry(
    rng: random.Random,
    lang: str,
    topic: str,
    q: str,
    freshness: str | None,
    now: datetime,
    used_urls: set[str],
    used_once: set[str],
) -> _Entry:
    pieces = _CONTENT[lang][topic]
    short_q = q.strip()[:80]
    phrase = rng.choice(pieces.titles).format(q=short_q)
    phrase = _capitalise(phrase)
    sites = [
        s for s in _SITES[lang] if (not s.topics or topic in s.topics) and s.domain not in used_once
    ]
    site = rng.choice(sites)
    if site.once:
        used_once.add(site.domain)
    separator = rng.choice((" | ", " - ", " – ", None))
    title = phrase if separator is None else f"{phrase}{separator}{site.name}"
    page_age, age = _pick_date(rng, freshness, now)
    when = datetime.fromisoformat(page_age).date() if page_age else now.date()
    attempt = 0
    url = _make_url(rng, site, phrase, topic, short_q, when, attempt)
    while url in used_urls:
        attempt += 1 + rng.randrange(3)
        url = _make_url(rng, site, phrase, topic, short_q, when, attempt)
    used_urls.add(url)
    description, strong, parts = _description(rng, lang, pieces, short_q)
    thumbnail = None
    if rng.random() < 0.55:
        thumbnail = f"https://{site.domain}/images/{_slug(phrase)[:40]}-{rng.randint(1, 999)}.jpg"
    snippets = None
    if rng.random() < 0.85:
        snippets = _extra_snippets(rng, lang, pieces, description, parts)
    return _Entry(
        lang=lang,
        title=title,
        url=url,
        site=site,
        description=description,
        strong=strong,
        escape_entities=rng.random() < 0.3,
        page_age=page_age,
        age=age,
        thumbnail=thumbnail,
        snippets=snippets,
    )


@lru_cache(maxsize=256)
def _ranked(
    q: str, country: str | None, search_lang: str | None, freshness: str | None, hour: str
) -> tuple[_Entry, ...]:
    """All ten pages of 20 for a query; the same arguments always give the same list.

    `hour` (the current UTC hour) anchors the dates, so results stay identical between calls
    while "3 days ago" stays roughly true.
    """
    rng = random.Random(f"{q}\x00{country}\x00{search_lang}\x00{freshness}\x00{hour}")
    now = datetime.fromisoformat(hour)
    target, quota = _target_language(country, search_lang)
    # Mostly the topics the query names; the rest from neighbouring topics, as a real index
    # drifts to related pages further down the list.
    matched = _topics_for(q) or [rng.choice(list(_TOPIC_KEYWORDS))]
    related = sorted(
        _TECH_TOPICS if _TECH_TOPICS & set(matched) else set(_TOPIC_KEYWORDS) - _TECH_TOPICS
    )
    used_urls: set[str] = set()
    used_once: set[str] = set()
    entries: list[_Entry] = []
    for _ in range(MAX_OFFSET + 1):
        langs = [target] * quota + ["en"] * (PAGE_SIZE - quota)
        rng.shuffle(langs)
        for lang in langs:
            near_top = len(entries) < 5
            topic = rng.choice(matched if near_top or rng.random() < 0.8 else related)
            entries.append(_entry(rng, lang, topic, q, freshness, now, used_urls, used_once))
    return tuple(entries)


def _brave_image(source: str, size: int) -> str:
    """A proxied image URL shaped like imgs.search.brave.com ones."""
    signature = base64.urlsafe_b64encode(hashlib.sha256(source.encode()).digest()).decode()
    payload = base64.urlsafe_b64encode(source.encode()).decode().rstrip("=")
    chunks = "/".join(payload[i : i + 16] for i in range(0, len(payload), 16))
    resize = f"rs:fit:{size}:{size}:1:0/g:ce"
    return f"https://imgs.search.brave.com/{signature.rstrip('=')}/{resize}/{chunks}"


def _render(entry: _Entry, query: _Query) -> dict[str, Any]:
    """The JSON object of one result, with the request's decoration and snippet options."""

    def text(part: str) -> str:
        return html.escape(part, quote=True) if entry.escape_entities else part

    a, b = entry.strong
    desc = entry.description
    if query.text_decorations:
        description = f"{text(desc[:a])}<strong>{text(desc[a:b])}</strong>{text(desc[b:])}"
    else:
        description = text(desc)
    domain = entry.site.domain
    favicon = _brave_image(
        f"http://favicons.search.brave.com/icons/{hashlib.sha256(domain.encode()).hexdigest()}"
        f"/{domain}/",
        32,
    )
    segments = [s for s in urlsplit(entry.url).path.split("/") if s]
    result: dict[str, Any] = {
        "title": entry.title,
        "url": entry.url,
        "is_source_local": False,
        "is_source_both": False,
        "description": description,
    }
    if entry.page_age:
        result["page_age"] = entry.page_age
    result |= {
        "profile": {"name": entry.site.name, "url": entry.url, "long_name": domain, "img": favicon},
        "language": entry.lang,
        "family_friendly": True,
        "type": "search_result",
        "subtype": "generic",
        "is_live": False,
        "meta_url": {
            "scheme": "https",
            "netloc": domain,
            "hostname": domain,
            "favicon": favicon,
            "path": "  ".join(f"› {s}" for s in segments),
        },
    }
    if entry.thumbnail:
        result["thumbnail"] = {
            "src": _brave_image(entry.thumbnail, 200),
            "original": entry.thumbnail,
            "logo": False,
        }
    if entry.age:
        result["age"] = entry.age
    if query.extra_snippets and entry.snippets:
        result["extra_snippets"] = list(entry.snippets)
    return result


@dataclass(frozen=True)
class CorpusPage:
    """A page of a local web the fake searches instead of inventing results (a benchmark's
    corpus): its address, title, plain text, language and day."""

    url: str
    title: str
    text: str
    lang: str = "en"
    day: str | None = None


_WORD = re.compile(r"\w{3,}")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _terms(text: str) -> list[str]:
    return _WORD.findall(_fold(text).lower())


@dataclass(frozen=True)
class _CorpusIndex:
    counts: tuple[Counter[str], ...]
    """Each page's terms, counted."""
    holding: Counter[str]
    """Pages holding each term."""
    average: float
    """Terms in a page, on average."""


@lru_cache(maxsize=4)
def _corpus_index(corpus: tuple[CorpusPage, ...]) -> _CorpusIndex:
    """The corpus's terms, counted once for all its queries (a benchmark's corpus of real
    pages took SearXNG's engine timeout to rank page by page)."""
    counts = tuple(Counter(_terms(f"{page.title} {page.text}")) for page in corpus)
    holding: Counter[str] = Counter(term for count in counts for term in count)
    average = sum(count.total() for count in counts) / max(1, len(counts))
    return _CorpusIndex(counts, holding, average)


def _corpus_ranked(q: str, corpus: tuple[CorpusPage, ...], start: int, count: int) -> list[_Entry]:
    """The corpus pages that hold a term of the query, by BM25 (k1 1.2, b 0.75), from
    `start`, `count` of them; each result's description the sentence richest in the query's
    terms, the next ones its extra snippets."""
    asked = set(_terms(q))
    index = _corpus_index(corpus)
    idf = {
        term: math.log(1 + (len(corpus) - index.holding[term] + 0.5) / (index.holding[term] + 0.5))
        for term in asked
    }
    scored = []
    for page, terms in zip(corpus, index.counts, strict=True):
        norm = 1.2 * (0.25 + 0.75 * terms.total() / index.average)
        score = sum(idf[term] * terms[term] * 2.2 / (terms[term] + norm) for term in asked)
        if score > 0:
            scored.append((score, page))
    scored.sort(key=lambda pair: -pair[0])
    return [_corpus_entry(page, asked) for _, page in scored[start : start + count]]


def _corpus_entry(page: CorpusPage, asked: set[str]) -> _Entry:
    sentences = [s for s in _SENTENCE.split(page.text.strip()) if s]
    ranked = sorted(sentences, key=lambda s: -len(asked & set(_terms(s))))
    host = urlsplit(page.url).netloc
    return _Entry(
        lang=page.lang,
        title=page.title,
        url=page.url,
        site=_Site(host, host, frozenset(), ""),
        description=ranked[0] if ranked else page.title,
        strong=(0, 0),
        escape_entities=False,
        page_age=f"{page.day}T00:00:00" if page.day else None,
        age=page.day,
        thumbnail=None,
        snippets=tuple(ranked[1:4]) or None,
    )


def _search_body(
    query: _Query, no_hits: bool, first: dict[str, str], corpus: tuple[CorpusPage, ...] = ()
) -> dict[str, Any]:
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0).isoformat()
    results: list[dict[str, Any]] = []
    if not no_hits:
        start = query.offset * query.count
        if corpus:
            ranked = _corpus_ranked(query.q, corpus, start, query.count)
        else:
            every = _ranked(query.q, query.country, query.search_lang, query.freshness, hour)
            ranked = list(every[start : start + query.count])
        results = [_render(e, query) for e in ranked]
    if results and first:
        results[0] |= {name: value.replace("{q}", query.q) for name, value in first.items()}
    body: dict[str, Any] = {
        "query": {
            "original": query.q,
            "show_strict_warning": False,
            "is_navigational": False,
            "is_news_breaking": False,
            "spellcheck_off": not query.spellcheck,
            "country": (query.country or "us").lower(),
            "bad_results": False,
            "should_fallback": False,
            "postal_code": "",
            "city": "",
            "header_country": "",
            "more_results_available": bool(results) and query.offset < MAX_OFFSET,
            "state": "",
        },
        "mixed": {
            "type": "mixed",
            "main": [{"type": "web", "index": i, "all": False} for i in range(len(results))],
            "top": [],
            "side": [],
        },
        "type": "search",
    }
    if results:  # the real API leaves "web" out entirely when nothing matched
        body["web"] = {"type": "search", "results": results, "family_friendly": True}
    return body


# --------------------------------------------------------------------------------------------
# Validation and errors, shaped like the real API's (pydantic-style entries in meta.errors)
# --------------------------------------------------------------------------------------------

_BOOLS = {"true": True, "1": True, "false": False, "0": False}
_FRESHNESS_RANGE = re.compile(r"^(\d{4}-\d{2}-\d{2})to(\d{4}-\d{2}-\d{2})$")
_UI_LANG = re.compile(r"^[a-z]{2}-[a-z]{2}$", re.IGNORECASE)
_INT = re.compile(r"^[+-]?\d+$")


def _choices(values: tuple[str, ...] | list[str]) -> str:
    quoted = [f"'{v}'" for v in values]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _problem(kind: str, name: str, msg: str, value: str | None, **ctx: Any) -> dict[str, Any]:
    problem: dict[str, Any] = {"type": kind, "loc": ["query", name], "msg": msg, "input": value}
    if ctx:
        problem["ctx"] = ctx
    return problem


def _int_param(
    params: dict[str, str], name: str, default: int, low: int, high: int, errors: list[dict]
) -> int:
    raw = params.get(name)
    if raw is None:
        return default
    if not _INT.match(raw.strip()):
        msg = "Input should be a valid integer, unable to parse string as an integer"
        errors.append(_problem("int_parsing", name, msg, raw))
        return default
    value = int(raw)
    if value < low:
        msg = f"Input should be greater than or equal to {low}"
        errors.append(_problem("greater_than_equal", name, msg, raw, ge=low))
    elif value > high:
        msg = f"Input should be less than or equal to {high}"
        errors.append(_problem("less_than_equal", name, msg, raw, le=high))
    return value


def _bool_param(params: dict[str, str], name: str, default: bool, errors: list[dict]) -> bool:
    raw = params.get(name)
    if raw is None:
        return default
    value = _BOOLS.get(raw.strip().lower())
    if value is None:
        msg = "Input should be a valid boolean, unable to interpret input"
        errors.append(_problem("bool_parsing", name, msg, raw))
        return default
    return value


def _choice_param(
    params: dict[str, str], name: str, allowed: tuple[str, ...], errors: list[dict]
) -> str | None:
    raw = params.get(name)
    if raw is None:
        return None
    for value in allowed:
        if raw.strip().lower() == value.lower():
            return value
    msg = f"Input should be {_choices(allowed)}"
    errors.append(_problem("enum", name, msg, raw, expected=_choices(allowed)))
    return None


def _check_freshness(raw: str | None, errors: list[dict]) -> str | None:
    if raw is None or raw in FRESHNESS_SHORT:
        return raw
    match = _FRESHNESS_RANGE.match(raw)
    try:
        if match and date.fromisoformat(match[1]) <= date.fromisoformat(match[2]):
            return raw
    except ValueError:
        pass
    msg = "Value error, freshness must be pd, pw, pm, py or a range YYYY-MM-DDtoYYYY-MM-DD"
    errors.append(_problem("value_error", "freshness", msg, raw))
    return None


def _validate(params: dict[str, str]) -> tuple[_Query, list[dict[str, Any]]]:
    errors: list[dict[str, Any]] = []
    q = params.get("q")
    if q is None:
        errors.append(_problem("missing", "q", "Field required", None))
    elif not q.strip():
        msg = "String should have at least 1 character"
        errors.append(_problem("string_too_short", "q", msg, q, min_length=1))
    elif len(q) > 400:
        msg = "String should have at most 400 characters"
        errors.append(_problem("string_too_long", "q", msg, q, max_length=400))
    elif len(q.split()) > 50:
        msg = "Value error, the query may contain at most 50 words"
        errors.append(_problem("value_error", "q", msg, q))
    count = _int_param(params, "count", PAGE_SIZE, 1, PAGE_SIZE, errors)
    offset = _int_param(params, "offset", 0, 0, MAX_OFFSET, errors)
    country = _choice_param(params, "country", tuple(COUNTRIES), errors)
    search_lang = _choice_param(params, "search_lang", tuple(SEARCH_LANGS), errors)
    ui_lang = params.get("ui_lang")
    if ui_lang is not None and not _UI_LANG.match(ui_lang):
        msg = "String should match pattern '^[a-z]{2}-[A-Z]{2}$'"
        pattern = "^[a-z]{2}-[A-Z]{2}$"
        errors.append(_problem("string_pattern_mismatch", "ui_lang", msg, ui_lang, pattern=pattern))
    safesearch = _choice_param(params, "safesearch", SAFESEARCH, errors) or "moderate"
    freshness = _check_freshness(params.get("freshness"), errors)
    query = _Query(
        q=q or "",
        count=count,
        offset=offset,
        country=None if country == "ALL" else country,
        search_lang=search_lang,
        ui_lang=ui_lang,
        safesearch=safesearch,
        freshness=freshness,
        text_decorations=_bool_param(params, "text_decorations", True, errors),
        extra_snippets=_bool_param(params, "extra_snippets", False, errors),
        spellcheck=_bool_param(params, "spellcheck", True, errors),
    )
    return query, errors


# --------------------------------------------------------------------------------------------
# LLM Context (/res/v1/llm/context), as Brave's API reference describes it (2026): the same
# query, country and language parameters as web search; count up to 50 results considered;
# caps on URLs, tokens and snippets (in all and per URL); a relevance threshold mode. The
# answer: grounding.generic, one object per page (url, title, snippets: its passages on the
# query, best first), and sources, keyed by URL (title, hostname, age: the day in words, as
# ISO and as "N days ago", or null).
# --------------------------------------------------------------------------------------------

THRESHOLD_MODES = ("strict", "balanced", "lenient", "disabled")
CHARS_PER_TOKEN = 4  # how the fake counts a passage against the token caps


@dataclass(frozen=True)
class _ContextQuery:
    q: str
    country: str | None
    search_lang: str | None
    count: int
    urls: int
    tokens: int
    tokens_per_url: int
    snippets: int
    snippets_per_url: int
    threshold: str
    freshness: str | None


def _validate_context(params: dict[str, str]) -> tuple[_ContextQuery, list[dict[str, Any]]]:
    shared = ("q", "country", "search_lang", "freshness")
    web, errors = _validate({k: v for k, v in params.items() if k in shared})
    number = _int_reader(params, errors)
    query = _ContextQuery(
        q=web.q,
        country=web.country,
        search_lang=web.search_lang,
        count=number("count", 20, 1, 50),
        urls=number("maximum_number_of_urls", 20, 1, 50),
        tokens=number("maximum_number_of_tokens", 8192, 1024, 32768),
        tokens_per_url=number("maximum_number_of_tokens_per_url", 4096, 512, 8192),
        snippets=number("maximum_number_of_snippets", 50, 1, 100),
        snippets_per_url=number("maximum_number_of_snippets_per_url", 50, 1, 100),
        threshold=_choice_param(params, "context_threshold_mode", THRESHOLD_MODES, errors)
        or "balanced",
        freshness=web.freshness,
    )
    return query, errors


def _int_reader(params: dict[str, str], errors: list[dict[str, Any]]) -> Any:
    """_int_param over these parameters and this list of problems."""

    def number(name: str, default: int, low: int, high: int) -> int:
        return _int_param(params, name, default, low, high, errors)

    return number


def _passages(entry: _Entry, page: CorpusPage | None, asked: set[str]) -> list[str]:
    """A page's passages on the query, best first: a corpus page's sentences that hold a
    term of it, else the invented result's description and snippets."""
    if page is None:
        return [entry.description, *(entry.snippets or ())]
    sentences = [s for s in _SENTENCE.split(page.text.strip()) if s]
    holding = [s for s in sentences if asked & set(_terms(s))]
    return sorted(holding, key=lambda s: -len(asked & set(_terms(s))))


def _context_body(
    query: _ContextQuery, no_hits: bool, first: dict[str, str], corpus: tuple[CorpusPage, ...]
) -> dict[str, Any]:
    """grounding.generic and sources for the query, within every cap asked."""
    if no_hits:
        entries: tuple[_Entry, ...] = ()
    elif corpus:
        entries = tuple(_corpus_ranked(query.q, corpus, 0, query.count))
    else:
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0).isoformat()
        entries = _ranked(query.q, query.country, query.search_lang, query.freshness, hour)
    pages = {page.url: page for page in corpus}
    asked = set(_terms(query.q))
    generic: list[dict[str, Any]] = []
    sources: dict[str, Any] = {}
    tokens_left, snippets_left = query.tokens, query.snippets
    for entry in entries[: query.count]:
        if len(generic) >= query.urls or snippets_left <= 0:
            break
        kept, used = [], 0
        for passage in _passages(entry, pages.get(entry.url), asked)[: query.snippets_per_url]:
            cost = max(1, len(passage) // CHARS_PER_TOKEN)
            if used + cost > min(query.tokens_per_url, tokens_left) or len(kept) >= snippets_left:
                break
            kept.append(passage)
            used += cost
        if not kept:
            continue
        tokens_left -= used
        snippets_left -= len(kept)
        item = {"url": entry.url, "title": entry.title, "snippets": kept}
        if not generic and first:
            item |= {
                k: v.replace("{q}", query.q) for k, v in first.items() if k in ("url", "title")
            }
        generic.append(item)
        sources[item["url"]] = {
            "title": item["title"],
            "hostname": urlsplit(item["url"]).hostname,
            "age": _ages(entry.page_age),
        }
    return {"grounding": {"generic": generic, "map": []}, "sources": sources}


def _ages(page_age: str | None) -> list[str] | None:
    """A source's "age" as Brave writes it: the day in words, in ISO, and how long ago."""
    if not page_age:
        return None
    day = datetime.fromisoformat(page_age[:10]).replace(tzinfo=UTC)
    ago = (datetime.now(UTC) - day).days
    return [day.strftime("%A, %B %-d, %Y"), day.strftime("%Y-%m-%d"), f"{ago} days ago"]


_DEFAULT_DETAILS = {
    "RATE_LIMITED": "Request rate limit exceeded for plan.",
    "QUOTA_LIMITED": "Request quota limit exceeded for plan.",
    "SUBSCRIPTION_TOKEN_INVALID": "The provided subscription token is invalid.",
    "VALIDATION": "Unable to validate request parameter(s).",
    "UNAUTHORIZED": "The request could not be authenticated.",
    "OPTION_NOT_IN_PLAN": "The requested option is not included in your subscription plan.",
    "RESOURCE_NOT_FOUND": "The requested resource was not found.",
    "METHOD_NOT_ALLOWED": "This endpoint only accepts GET requests.",
}


def _error_meta(code: str, quota_used: int, params: dict[str, str]) -> dict[str, Any]:
    """The "meta" object the real API sends with each error code."""
    if code in ("RATE_LIMITED", "QUOTA_LIMITED"):
        return {
            "plan": "Free",
            "rate_limit": RATE_LIMIT_PER_SECOND,
            "rate_current": RATE_LIMIT_PER_SECOND + (code == "RATE_LIMITED"),
            "quota_limit": MONTHLY_QUOTA,
            "quota_current": max(quota_used, MONTHLY_QUOTA)
            if code == "QUOTA_LIMITED"
            else quota_used,
            "org_rate_limit": None,
            "org_rate_current": 0,
            "component": "rate_limiter",
        }
    if code == "VALIDATION":  # injected, so the request may be fine: still name a field
        errors = _validate(params)[1] or [
            _problem("value_error", "q", "Value error, the query was rejected", params.get("q"))
        ]
        return {"errors": errors}
    if code == "SUBSCRIPTION_TOKEN_INVALID":
        return {"component": "authentication"}
    return {"component": "api"}


def _error_body(status: int, code: str, detail: str | None, meta: dict[str, Any]) -> dict[str, Any]:
    default = _DEFAULT_DETAILS.get(code, code.replace("_", " ").capitalize() + ".")
    return {
        "type": "ErrorResponse",
        "error": {
            "id": str(uuid.uuid4()),
            "status": status,
            "code": code,
            "detail": detail or default,
            "meta": meta,
        },
        "time": int(time.time()),
    }


def _seconds_to_month_end(now: datetime) -> int:
    days = calendar.monthrange(now.year, now.month)[1]
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = start + timedelta(days=days)
    return int((end - now).total_seconds())


# --------------------------------------------------------------------------------------------
# HTTP server
# --------------------------------------------------------------------------------------------


class _Handler(DispatchingHandler):
    server: LoopbackServer[FakeBrave]
    server_version = "FakeBrave/1.0"

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib naming
        self._dispatch()

    def _dispatch(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)  # drain a body so the connection can be reused
        split = urlsplit(self.path)
        params = {k: v[0] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        recorded = RecordedRequest(path=split.path, params=params, headers=headers)
        status, body, extra = self.server.fake._answer(self.command, recorded)
        self._send(status, body, extra, "gzip" in headers.get("accept-encoding", ""))

    def _send(
        self, status: int, body: dict[str, Any], headers: dict[str, str], compress: bool
    ) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        if compress:
            data = gzip.compress(data, compresslevel=5)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if compress:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Vary", "Accept-Encoding")
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


class FakeBrave(LoopbackFake):
    """The fake Brave web-search API. Use ``with FakeBrave() as brave:`` or start()/stop().

    Tests read ``requests`` to see what the engine sent, call ``fail_next`` to make the next
    requests fail the way the real API does, add to ``no_hits_queries`` to get an answer
    without a ``web`` section, set ``first_result`` to write the first result's fields
    themselves, and ``corpus`` to search a local web instead (bench/research.py).
    """

    _handler_class = _Handler
    _thread_name = "fake-brave"

    def __init__(self, api_key: str = "test-key") -> None:
        super().__init__()
        self.api_key = api_key
        self.endpoint = ""
        self.requests: list[RecordedRequest] = []
        self.no_hits_queries: set[str] = set()
        self.corpus: tuple[CorpusPage, ...] = ()
        """A local web searched instead of the invented results: only its pages that hold a
        term of the query, best first (none: an answer without a web section)."""
        self.first_result: dict[str, str] = {}
        """Fields of the first result written by the test ("{q}" in them is the query): a
        title or description that echoes the query as the engine chose to, a URL of the
        loopback page server."""
        self._failures: deque[_Failure] = deque()
        self._lock = threading.Lock()
        self._quota_used = 0
        self.monthly_quota = MONTHLY_QUOTA
        """The plan's monthly cap the headers state; 0: none (as on the real API)."""

    # -- lifecycle ---------------------------------------------------------------------------

    def _serving_at(self, host: str, port: int) -> str:
        """The base URL, and the search endpoint the engine is pointed at."""
        url = super()._serving_at(host, port)
        self.endpoint = url + SEARCH_PATH
        return url

    # -- test controls -----------------------------------------------------------------------

    def fail_next(self, status: int, code: str, detail: str | None = None, times: int = 1) -> None:
        """Answer the next `times` search requests with the real API's error body for `code`."""
        with self._lock:
            self._failures.extend(_Failure(status, code, detail) for _ in range(times))

    def spend(self, queries: int) -> None:
        """Count `queries` against the month, as if they had been made elsewhere."""
        with self._lock:
            self._quota_used += queries

    def clear(self) -> None:
        """Forget recorded requests, pending failures and the month's spending (the list
        object is kept)."""
        with self._lock:
            self.requests.clear()
            self._failures.clear()
            self._quota_used = 0
            self.monthly_quota = MONTHLY_QUOTA
            self.first_result = {}
            self.corpus = ()

    # -- request handling (called from server threads) ---------------------------------------

    def _answer(
        self, method: str, request: RecordedRequest
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._lock:
            self.requests.append(request)
            failure = None
            if request.path in (SEARCH_PATH, CONTEXT_PATH) and method == "GET":
                self._quota_used += 1
                failure = self._failures.popleft() if self._failures else None
                if failure is None and 0 < self.monthly_quota < self._quota_used:
                    failure = _Failure(429, "QUOTA_LIMITED", None)  # the month is spent
            quota_used = self._quota_used
            no_hits = {s.strip().lower() for s in self.no_hits_queries}
            first = dict(self.first_result)
            corpus = self.corpus
        headers = self._rate_headers(quota_used, failure, self.monthly_quota)
        if request.path not in (SEARCH_PATH, CONTEXT_PATH):
            return self._error(404, "RESOURCE_NOT_FOUND", None, quota_used, request, headers)
        if method != "GET":
            headers["Allow"] = "GET"
            return self._error(405, "METHOD_NOT_ALLOWED", None, quota_used, request, headers)
        if failure is not None:
            status, code, detail = failure.status, failure.code, failure.detail
            return self._error(status, code, detail, quota_used, request, headers)
        if request.headers.get("x-subscription-token") != self.api_key:
            code = "SUBSCRIPTION_TOKEN_INVALID"
            return self._error(422, code, None, quota_used, request, headers)
        if request.path == CONTEXT_PATH:
            asked, problems = _validate_context(request.params)
            if problems:
                return 422, _error_body(422, "VALIDATION", None, {"errors": problems}), headers
            no_answer = asked.q.strip().lower() in no_hits
            return 200, _context_body(asked, no_answer, first, corpus), headers
        query, errors = _validate(request.params)
        if errors:
            body = _error_body(422, "VALIDATION", None, {"errors": errors})
            return 422, body, headers
        no_hit = query.q.strip().lower() in no_hits
        return 200, _search_body(query, no_hit, first, corpus), headers

    @staticmethod
    def _error(
        status: int,
        code: str,
        detail: str | None,
        quota_used: int,
        request: RecordedRequest,
        headers: dict[str, str],
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        meta = _error_meta(code, quota_used, request.params)
        return status, _error_body(status, code, detail, meta), headers

    @staticmethod
    def _rate_headers(quota_used: int, failure: _Failure | None, quota: int) -> dict[str, str]:
        """Comma pairs "<per second>, <per month>", as the real API sends them on every
        answer, errors included (a monthly limit of 0: no monthly cap, remaining 0)."""
        month_reset = _seconds_to_month_end(datetime.now(UTC))
        remaining_month = max(0, quota - quota_used)
        if failure is not None and failure.code == "QUOTA_LIMITED":
            remaining_month = 0
        return {
            "X-RateLimit-Limit": f"{RATE_LIMIT_PER_SECOND}, {quota}",
            "X-RateLimit-Remaining": f"0, {remaining_month}",
            "X-RateLimit-Reset": f"1, {month_reset}",
            "X-RateLimit-Policy": f"{RATE_LIMIT_PER_SECOND};w=1, {quota};w=2592000",
        }


def main(argv: list[str] | None = None) -> None:
    """Serve until Ctrl-C, for manual runs and benchmarks."""
    parser = argparse.ArgumentParser(description="Fake Brave Search API (web search).")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--api-key", default="test-key")
    args = parser.parse_args(argv)
    fake = FakeBrave(api_key=args.api_key)
    fake.start(port=args.port, host=args.host)
    print(f"Fake Brave API at {fake.endpoint} (X-Subscription-Token: {args.api_key})", flush=True)
    fake.serve_until_interrupted()


if __name__ == "__main__":
    main()
