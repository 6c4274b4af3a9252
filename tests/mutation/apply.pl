#!/usr/bin/perl
# Applies one mutation spec (tests/mutation/specs/*.mut) to a source tree, or
# only checks that it would apply.
#
#   apply.pl --check TREE SPEC...   exit 0 when every edit of every spec finds
#                                   its snippet exactly once; else names each
#                                   stale edit on stderr and exits 1
#   apply.pl --apply TREE SPEC      applies the edits of one spec (all or none);
#                                   exit 1 (nothing written) when it is stale
#   apply.pl --field NAME SPEC      prints a header field (name, invariant, tests)
#
# A spec is a header of "field: value" lines (comments start with #), then one
# or more edits:
#   file: PATH (relative to TREE)
#   find:
#   <exact lines that must occur exactly once in PATH>
#   replace:
#   <the lines that take their place>
#   end
use strict;
use warnings;

sub parse_spec {
    my ($path) = @_;
    open(my $fh, '<', $path) or die "apply.pl: cannot read $path: $!\n";
    my (%hdr, @edits, $cur, $mode);
    while (my $line = <$fh>) {
        if (defined $mode) {
            if ($line eq "replace:\n" && $mode eq 'find') { $mode = 'replace'; next; }
            if ($line eq "end\n" && $mode eq 'replace') { push @edits, $cur; undef $mode; undef $cur; next; }
            $cur->{$mode} .= $line;
            next;
        }
        next if $line =~ /^\s*(#|$)/;
        if ($line =~ /^file:\s*(\S+)\s*$/) { $cur = { file => $1, find => '', replace => '' }; next; }
        if ($line eq "find:\n") {
            die "apply.pl: $path: find: before file:\n" unless $cur;
            $mode = 'find';
            next;
        }
        if ($line =~ /^(\w+):\s*(.*?)\s*$/) { $hdr{$1} = $2; next; }
        die "apply.pl: $path: cannot read line: $line";
    }
    die "apply.pl: $path: an edit has no end line\n" if defined $mode;
    die "apply.pl: $path: no edits\n" unless @edits;
    for my $f (qw(name invariant tests)) {
        die "apply.pl: $path: no $f: field\n" unless defined $hdr{$f};
    }
    for my $e (@edits) {
        die "apply.pl: $path: empty find: in $e->{file}\n" if $e->{find} eq '';
    }
    return (\%hdr, \@edits);
}

sub slurp {
    my ($p) = @_;
    open(my $fh, '<', $p) or return undef;
    local $/;
    my $s = <$fh>;
    return $s;
}

sub count_of {
    my ($hay, $needle) = @_;
    my ($n, $pos) = (0, 0);
    while ((my $i = index($hay, $needle, $pos)) >= 0) { $n++; $pos = $i + 1; }
    return $n;
}

# Returns the new texts by file, or undef (and messages on stderr) when stale.
sub plan {
    my ($tree, $spec) = @_;
    my ($hdr, $edits) = parse_spec($spec);
    my (%text, $stale);
    for my $e (@$edits) {
        my $p = "$tree/$e->{file}";
        $text{$e->{file}} //= slurp($p);
        if (!defined $text{$e->{file}}) {
            print STDERR "STALE $hdr->{name}: $e->{file} does not exist\n";
            $stale = 1;
            next;
        }
        my $n = count_of($text{$e->{file}}, $e->{find});
        if ($n != 1) {
            my $first = (split /\n/, $e->{find})[0];
            print STDERR "STALE $hdr->{name}: $e->{file}: snippet found $n times: $first\n";
            $stale = 1;
            next;
        }
        my $i = index($text{$e->{file}}, $e->{find});
        substr($text{$e->{file}}, $i, length($e->{find})) = $e->{replace};
    }
    return $stale ? undef : \%text;
}

my $cmd = shift @ARGV // '';
if ($cmd eq '--field') {
    my ($field, $spec) = @ARGV;
    my ($hdr) = parse_spec($spec);
    print(($hdr->{$field} // ''), "\n");
    exit 0;
}
if ($cmd eq '--check') {
    my $tree = shift @ARGV;
    my $bad = 0;
    my %names;
    for my $spec (@ARGV) {
        my ($hdr) = parse_spec($spec);
        if ($names{$hdr->{name}}++) { print STDERR "apply.pl: two specs named $hdr->{name}\n"; $bad++; }
        $bad++ unless plan($tree, $spec);
    }
    printf "%d mutation specs checked, %d stale\n", scalar(@ARGV), $bad;
    exit($bad ? 1 : 0);
}
if ($cmd eq '--apply') {
    my ($tree, $spec) = @ARGV;
    my $text = plan($tree, $spec) or exit 1;
    for my $f (sort keys %$text) {
        open(my $fh, '>', "$tree/$f") or die "apply.pl: cannot write $tree/$f: $!\n";
        print $fh $text->{$f};
        close($fh) or die "apply.pl: writing $tree/$f: $!\n";
    }
    exit 0;
}
print STDERR "usage: apply.pl --check TREE SPEC... | --apply TREE SPEC | --field NAME SPEC\n";
exit 2;
